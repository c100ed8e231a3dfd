//go:build !unix

package broker

import (
	"context"
	"errors"
)

func brokerPush(ctx context.Context, req Request) (*PushResult, error) {
	return nil, errors.New("host broker: reading an agent's checkout safely needs a Unix host (openat with O_NOFOLLOW)")
}
