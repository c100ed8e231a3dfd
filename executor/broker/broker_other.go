//go:build !unix

package broker

import (
	"context"
	"errors"
)

func brokerPush(ctx context.Context, req Request) (*PushResult, error) {
	return nil, errors.New("host broker: reading an agent's checkout safely needs a Unix host (openat with O_NOFOLLOW)")
}

func brokerRemoteBranch(context.Context, BranchRequest) (string, error) {
	return "", errors.New("host broker: asking a remote needs a Unix host")
}
