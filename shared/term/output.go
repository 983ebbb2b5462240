package term

import "github.com/paddockhq/paddock/api/termproto"

// EncodeOutput returns an output frame for c.
func EncodeOutput(c Chunk) []byte {
	return termproto.AppendOutput(make([]byte, 0, 9+len(c.Data)), c.Offset, c.Data)
}
