//go:build !unix

package executor

import (
	"context"
	"errors"
)

func brokerPush(ctx context.Context, req BrokerRequest) (*PushResult, error) {
	return nil, errors.New("host broker: reading an agent's checkout safely needs a Unix host (openat with O_NOFOLLOW)")
}
