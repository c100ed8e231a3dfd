package k8snode

import (
	"context"
	"fmt"
	"net"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The cluster DNS is CoreDNS as a pod, as on a real cluster: the Deployment "coredns" and the Service "kube-dns"
// in kube-system, its pods labelled k8s-app=kube-dns listening on port 53, which is what a NetworkPolicy's DNS
// rule (kewplan's proxy's among them) selects. It runs as nobody: the pod's namespaced sysctl
// net.ipv4.ip_unprivileged_port_start lets it bind 53 without a capability.
const dnsPort = 53

// DNSServiceIP is the cluster DNS Service's address (kube-system/kube-dns): the tenth of the service range.
func (n *Node) DNSServiceIP() string {
	_, svc, _ := net.ParseCIDR(n.ServiceCIDR)
	ip := slices.Clone(svc.IP.To4())
	ip[3] += 10
	return ip.String()
}

// startDNS creates the cluster DNS objects and waits for its pod to be ready.
func (n *Node) startDNS(ctx context.Context) error {
	cs, err := n.client()
	if err != nil {
		return err
	}
	labels := map[string]string{"k8s-app": "kube-dns"}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system"}, Data: map[string]string{
		"Corefile": fmt.Sprintf(".:%d {\n  errors\n  hosts /etc/coredns/hosts {\n    reload 0\n  }\n}\n", dnsPort),
		"hosts":    hostsFile(n.HostIP, n.opts.HostNames),
	}}
	if _, err := cs.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("the cluster DNS's ConfigMap: %w", err)
	}
	f := false
	t := true
	nobody := int64(65534)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system", Labels: labels},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				DNSPolicy: corev1.DNSDefault, AutomountServiceAccountToken: &f, EnableServiceLinks: &f,
				SecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}}},
				Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "coredns"}}}}},
				Containers: []corev1.Container{{Name: "coredns", Image: binaryImageRef(n.bin, "coredns"), ImagePullPolicy: corev1.PullNever,
					Args:         []string{"-conf", "/etc/coredns/Corefile"},
					Ports:        []corev1.ContainerPort{{ContainerPort: dnsPort, Protocol: corev1.ProtocolUDP}, {ContainerPort: dnsPort, Protocol: corev1.ProtocolTCP}},
					VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(dnsPort)}},
						PeriodSeconds: 1},
					SecurityContext: &corev1.SecurityContext{RunAsNonRoot: &t, RunAsUser: &nobody, AllowPrivilegeEscalation: &f,
						ReadOnlyRootFilesystem: &t, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				}},
			}}}}
	if _, err := cs.AppsV1().Deployments("kube-system").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("the cluster DNS's Deployment: %w", err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system", Labels: labels},
		Spec: corev1.ServiceSpec{ClusterIP: n.DNSServiceIP(), Selector: labels, Ports: []corev1.ServicePort{
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(dnsPort)},
			{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(dnsPort)}}}}
	if _, err := cs.CoreV1().Services("kube-system").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("the cluster DNS's Service: %w", err)
	}
	return n.waitFor(ctx, "the cluster DNS's pod", func() bool {
		d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas > 0
	})
}
