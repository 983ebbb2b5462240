package acpagent

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// A file that does not exist is ACP's "resource not found" (an agent then
// creates it); any other fs error is invalid params.
func TestRequestErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{fmt.Errorf("read /w/a.txt: %w", fs.ErrNotExist), codeResourceNotFound},
		{errors.New("outside the workspace"), acp.NewInvalidParams(nil).Code},
		{acp.NewMethodNotFound("x"), acp.NewMethodNotFound("x").Code},
	} {
		var re *acp.RequestError
		if !errors.As(requestError(tc.err), &re) || re.Code != tc.code {
			t.Errorf("requestError(%v) = %v, want code %d", tc.err, requestError(tc.err), tc.code)
		}
	}
}
