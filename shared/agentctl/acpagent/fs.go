package acpagent

import (
	"context"
	"errors"
	"io/fs"
	"strings"

	acp "github.com/coder/acp-go-sdk"
)

// FileSystem serves an agent's fs/read_text_file and fs/write_text_file
// (agentctl: the session workspace, confined as its file API is). Paths are
// the agent's, absolute as ACP has them.
type FileSystem interface {
	// ReadTextFile returns a whole text file.
	ReadTextFile(path string) (string, error)
	// WriteTextFile replaces (or creates) a text file atomically.
	WriteTextFile(path, content string) error
}

// codeResourceNotFound is ACP's JSON-RPC error code for a resource that
// does not exist (its ErrorCode "resource not found").
const codeResourceNotFound = -32002

// requestError turns an error of a FileSystem or Terminals into the
// JSON-RPC error the agent gets: resource not found for a file that does
// not exist (an agent then knows it is to create it), else invalid params
// (the path or id it sent is what is wrong), unless it is one already.
func requestError(err error) error {
	var re *acp.RequestError
	if errors.As(err, &re) {
		return re
	}
	if errors.Is(err, fs.ErrNotExist) {
		return &acp.RequestError{Code: codeResourceNotFound, Message: "Resource not found", Data: map[string]any{"error": err.Error()}}
	}
	return acp.NewInvalidParams(map[string]any{"error": err.Error()})
}

func (c *client) ReadTextFile(ctx context.Context, p acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	if c.a.cfg.FS == nil {
		return acp.ReadTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsReadTextFile)
	}
	text, err := c.a.cfg.FS.ReadTextFile(p.Path)
	if err != nil {
		return acp.ReadTextFileResponse{}, requestError(err)
	}
	return acp.ReadTextFileResponse{Content: sliceLines(text, p.Line, p.Limit)}, nil
}

func (c *client) WriteTextFile(ctx context.Context, p acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	if c.a.cfg.FS == nil {
		return acp.WriteTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsWriteTextFile)
	}
	if err := c.a.cfg.FS.WriteTextFile(p.Path, p.Content); err != nil {
		return acp.WriteTextFileResponse{}, requestError(err)
	}
	return acp.WriteTextFileResponse{}, nil
}

// sliceLines returns limit lines of text from the 1-based line (nil: from
// the first; nil limit: to the end), each with its newline.
func sliceLines(text string, line, limit *int) string {
	if line == nil && limit == nil {
		return text
	}
	start := 1
	if line != nil && *line > 1 {
		start = *line
	}
	// Skip to the start line.
	rest := text
	for i := 1; i < start; i++ {
		j := strings.IndexByte(rest, '\n')
		if j < 0 {
			return ""
		}
		rest = rest[j+1:]
	}
	if limit == nil {
		return rest
	}
	if *limit <= 0 {
		return ""
	}
	end := 0
	for n := 0; n < *limit; n++ {
		j := strings.IndexByte(rest[end:], '\n')
		if j < 0 {
			return rest
		}
		end += j + 1
	}
	return rest[:end]
}
