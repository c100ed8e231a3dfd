//go:build !unix

package broker

import (
	"context"
	"errors"
)

func brokerSalvage(context.Context, SalvageRequest) (*SalvageResult, error) {
	return nil, errors.New("host broker: reading an agent's checkout safely needs a Unix host (openat with O_NOFOLLOW)")
}

func brokerPublishSalvage(context.Context, PublishRequest) (*PushResult, error) {
	return nil, errors.New("host broker: publishing salvaged work needs a Unix host")
}
