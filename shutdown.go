package hongbao

import (
	"errors"
	"fmt"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// plainStoreErr prefixes err, from a store call that needs no other
// mapping (a list, a counter), and files a refusal by a closed client
// under ErrClosed.
func plainStoreErr(err error) error {
	if errors.Is(err, redisstore.ErrClientClosed) {
		return &kindError{kind: ErrClosed, cause: err}
	}
	return fmt.Errorf("hongbao: %w", err)
}
