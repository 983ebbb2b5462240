package term

import "encoding/binary"

// seqState is the state of the incremental escape-sequence / UTF-8 parser that decides
// where a replay may start and which sequences are terminal queries.
type seqState uint8

const (
	stGround    seqState = iota // between characters: a safe cut point
	stUTF8                      // inside a multi-byte UTF-8 character
	stEsc                       // after ESC
	stEscInter                  // ESC + intermediate bytes
	stCSI                       // ESC [ … before the final byte
	stOSC                       // ESC ] … string
	stDCS                       // ESC P … header (params, intermediates, final)
	stDCSString                 // DCS passthrough data
	stIgnoreStr                 // SOS / PM / APC string
	stStrEsc                    // ESC seen inside a string: ST if followed by '\'
)

// maxCollect bounds how many bytes of a sequence are kept to classify it.
const maxCollect = 64

// seqParser is a byte-at-a-time VT parser reduced to what the ring needs: whether the
// position after a byte is a safe cut point, and whether a sequence that just ended is a
// terminal query (a request the terminal answers by writing into the shell's input).
type seqParser struct {
	state    seqState
	need     uint8    // UTF-8 continuation bytes still expected
	strKind  seqState // which string an stStrEsc belongs to
	seqStart int64    // stream offset of the ESC that began the current sequence
	buf      [maxCollect]byte
	n        int // bytes collected into buf (saturates)
	dropped  bool
}

func (p *seqParser) collect(b byte) {
	if p.n < maxCollect {
		p.buf[p.n] = b
		p.n++
	} else {
		p.dropped = true
	}
}

// collectRun is collect for each byte of run.
func (p *seqParser) collectRun(run []byte) {
	n := copy(p.buf[p.n:], run)
	p.n += n
	if n < len(run) {
		p.dropped = true
	}
}

func (p *seqParser) begin(off int64) {
	p.state = stEsc
	p.seqStart = off
	p.n = 0
	p.dropped = false
}

// safe reports whether the parser is between characters and sequences.
func (p *seqParser) safe() bool { return p.state == stGround }

// step feeds the byte at stream offset off. When it completes a terminal query it
// returns query=true and the query's start offset (the query spans [start, off+1)).
func (p *seqParser) step(b byte, off int64) (query bool, start int64) {
	switch p.state {
	case stGround:
		return p.ground(b, off)
	case stUTF8:
		if b >= 0x80 && b <= 0xbf {
			p.need--
			if p.need == 0 {
				p.state = stGround
			}
			return false, 0
		}
		// An invalid sequence: the terminal prints U+FFFD and reprocesses this byte.
		p.state = stGround
		return p.ground(b, off)
	case stEsc:
		switch {
		case b == 0x1b:
			p.begin(off)
		case b == 0x18 || b == 0x1a:
			p.state = stGround
		case b < 0x20 || b == 0x7f:
			// C0 controls execute without leaving the sequence.
		case b == '[':
			p.state = stCSI
		case b == ']':
			p.state = stOSC
		case b == 'P':
			p.state = stDCS
		case b == 'X' || b == '^' || b == '_':
			p.state = stIgnoreStr
		case b >= 0x20 && b <= 0x2f:
			p.collect(b)
			p.state = stEscInter
		case b >= 0x30 && b <= 0x7e:
			p.state = stGround
			if b == 'Z' { // DECID: same answer as DA1
				return true, p.seqStart
			}
		default:
			p.state = stGround
			return p.ground(b, off)
		}
	case stEscInter:
		switch {
		case b == 0x1b:
			p.begin(off)
		case b == 0x18 || b == 0x1a:
			p.state = stGround
		case b >= 0x20 && b <= 0x2f:
			p.collect(b)
		case b >= 0x30 && b <= 0x7e:
			p.state = stGround
		case b < 0x20 || b == 0x7f:
		default:
			p.state = stGround
			return p.ground(b, off)
		}
	case stCSI:
		switch {
		case b == 0x1b:
			p.begin(off)
		case b == 0x18 || b == 0x1a:
			p.state = stGround
		case b >= 0x20 && b <= 0x3f:
			p.collect(b)
		case b >= 0x40 && b <= 0x7e:
			p.state = stGround
			if !p.dropped && isCSIQuery(p.buf[:p.n], b) {
				return true, p.seqStart
			}
		case b < 0x20 || b == 0x7f:
		default:
			// Non-ASCII inside CSI: stay in the sequence (conservative).
		}
	case stOSC:
		switch {
		case b == 0x07:
			p.state = stGround
			if isOSCQuery(p.buf[:p.n], p.dropped) {
				return true, p.seqStart
			}
		case b == 0x1b:
			p.strKind = stOSC
			p.state = stStrEsc
		case b == 0x18 || b == 0x1a:
			p.state = stGround
		default:
			p.collect(b)
		}
	case stDCS:
		switch {
		case b == 0x1b:
			p.strKind = stDCS
			p.state = stStrEsc
		case b == 0x18 || b == 0x1a:
			p.state = stGround
		case b >= 0x20 && b <= 0x3f:
			p.collect(b)
		case b >= 0x40 && b <= 0x7e:
			p.collect(b)
			p.state = stDCSString
		}
	case stDCSString:
		switch {
		case b == 0x1b:
			p.strKind = stDCSString
			p.state = stStrEsc
		case b == 0x18 || b == 0x1a:
			p.state = stGround
		}
	case stIgnoreStr:
		switch {
		case b == 0x1b:
			p.strKind = stIgnoreStr
			p.state = stStrEsc
		case b == 0x18 || b == 0x1a:
			p.state = stGround
		}
	case stStrEsc:
		if b == '\\' {
			p.state = stGround
			switch p.strKind {
			case stOSC:
				if isOSCQuery(p.buf[:p.n], p.dropped) {
					return true, p.seqStart
				}
			case stDCS, stDCSString:
				if isDCSQuery(p.buf[:p.n]) {
					return true, p.seqStart
				}
			}
			return false, 0
		}
		// The string was cancelled by a new escape sequence that began at off-1.
		p.begin(off - 1)
		return p.step(b, off)
	}
	return false, 0
}

func (p *seqParser) ground(b byte, off int64) (bool, int64) {
	switch {
	case b == 0x1b:
		p.begin(off)
	case b == 0x05: // ENQ asks for the answerback message
		return true, off
	case b >= 0xc2 && b <= 0xdf:
		p.state, p.need = stUTF8, 1
	case b >= 0xe0 && b <= 0xef:
		p.state, p.need = stUTF8, 2
	case b >= 0xf0 && b <= 0xf4:
		p.state, p.need = stUTF8, 3
	}
	return false, 0
}

// isCSIQuery classifies a complete CSI sequence (collected parameter and intermediate
// bytes, then the final byte) as a request for a report.
func isCSIQuery(c []byte, final byte) bool {
	var prefix byte
	if len(c) > 0 && c[0] >= 0x3c && c[0] <= 0x3f {
		prefix = c[0]
		c = c[1:]
	}
	var inter byte
	params := c
	for i, b := range c {
		if b >= 0x20 && b <= 0x2f {
			inter = b
			params = c[:i]
			break
		}
	}
	switch final {
	case 'c': // DA1, DA2 (>), DA3 (=)
		return inter == 0 && (prefix == 0 || prefix == '>' || prefix == '=')
	case 'n': // DSR, CPR, DECXCPR and friends: every "n" is a status request
		return inter == 0 && (prefix == 0 || prefix == '?')
	case 'p': // DECRQM (ANSI and private)
		return inter == '$'
	case 'q': // XTVERSION
		return prefix == '>' && inter == 0
	case 'u': // kitty keyboard flags query; DECRQTSR ($u); DECRQUPSS (&u)
		return (prefix == '?' && inter == 0) || inter == '$' || inter == '&'
	case 'w': // DECRQPSR
		return inter == '$'
	case 'x': // DECREQTPARM
		return prefix == 0 && inter == 0
	case 'y': // DECRQCRA
		return inter == '*'
	case 'S': // XTSMGRAPHICS
		return prefix == '?' && inter == 0
	case 'm': // XTQMODKEYS
		return prefix == '?' && inter == 0
	case 't': // XTWINOPS reports
		if prefix != 0 || inter != 0 {
			return false
		}
		first := params
		for i, b := range params {
			if b == ';' {
				first = params[:i]
				break
			}
		}
		switch string(first) {
		case "11", "13", "14", "15", "16", "18", "19", "20", "21":
			return true
		}
	}
	return false
}

// isOSCQuery reports whether an OSC payload asks for a value ("?" as one of its
// ';'-separated fields, e.g. 10;? or 4;1;? or 52;c;?). Titles (0, 1, 2) never count.
func isOSCQuery(payload []byte, truncated bool) bool {
	if len(payload) == 0 {
		return false
	}
	num := payload
	for i, b := range payload {
		if b == ';' {
			num = payload[:i]
			break
		}
	}
	switch string(num) {
	case "0", "1", "2", "":
		return false
	}
	start := 0
	for i := 0; i <= len(payload); i++ {
		if i == len(payload) || payload[i] == ';' {
			if i-start == 1 && payload[start] == '?' && (i < len(payload) || !truncated) {
				return true
			}
			start = i + 1
		}
	}
	return false
}

// isDCSQuery recognises DECRQSS (DCS $ q … ST) and XTGETTCAP (DCS + q … ST).
func isDCSQuery(header []byte) bool {
	n := len(header)
	if n < 2 || header[n-1] != 'q' {
		return false
	}
	return header[n-2] == '$' || header[n-2] == '+'
}

// groundSpecial marks the bytes that change anything when the parser is in stGround:
// ESC (a sequence starts), ENQ (a query) and UTF-8 lead bytes. Every other byte,
// printable or not, leaves the parser in stGround with nothing to report. Read only.
var groundSpecial = func() (t [256]bool) {
	t[0x1b], t[0x05] = true, true
	for b := 0xc2; b <= 0xf4; b++ {
		t[b] = true
	}
	return t
}()

// SWAR constants: one bit pattern per byte of a 64-bit word.
const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// skipGround returns the index of the first byte of data at or after i that
// groundSpecial marks (len(data) if none). It tests eight bytes at a time for ESC, ENQ
// or a byte >= 0x80 and only looks at single bytes around a hit, so runs of plain text
// (printable ASCII, CR, LF, TAB, BS, …) cost a fraction of a cycle per byte.
func skipGround(data []byte, i int) int {
	for {
		for i+8 <= len(data) {
			w := binary.LittleEndian.Uint64(data[i:])
			esc := w ^ (swarOnes * 0x1b)
			enq := w ^ (swarOnes * 0x05)
			// (v - 0x0101…) & ^v & 0x8080… is non-zero exactly when some byte of v is
			// zero; with w's own high bits this finds ESC, ENQ and non-ASCII bytes.
			if (w|(esc-swarOnes)&^esc|(enq-swarOnes)&^enq)&swarHigh != 0 {
				break
			}
			i += 8
		}
		// Look at the word that had a hit (or the last few bytes) one byte at a time:
		// the hit may be a byte >= 0x80 that is not special (a stray continuation byte).
		end := min(i+8, len(data))
		for ; i < end; i++ {
			if groundSpecial[data[i]] {
				return i
			}
		}
		if i == len(data) {
			return i
		}
	}
}

// utf8Len is the length of the UTF-8 character that lead byte b (0xc2..0xf4) begins.
func utf8Len(b byte) int {
	switch {
	case b <= 0xdf:
		return 2
	case b <= 0xef:
		return 3
	}
	return 4
}

// feed runs the parser over data, whose first byte is at stream offset off, exactly as
// calling step for each byte would, and appends the span of every terminal query that
// ends in data to *queries (queries may be nil when only the state matters, as for the
// ring's tail). Between sequences it skips plain text in bulk and whole well-formed
// UTF-8 characters at once; sequences and malformed UTF-8 go through step.
func (p *seqParser) feed(data []byte, off int64, queries *[]span) {
	i := 0
	for i < len(data) {
		if p.state == stGround {
			i = skipGround(data, i)
			if i == len(data) {
				return
			}
			if b := data[i]; b >= 0xc2 {
				// A complete, well-formed character leaves the parser in stGround again.
				if n := utf8Len(b); i+n <= len(data) && utf8Tail(data[i+1:i+n]) {
					i += n
					continue
				}
			} else if b == 0x1b {
				// A whole CSI sequence (SGR colours, cursor moves) in data: classify it
				// from data directly. In stGround the fields step would fill in
				// (seqStart, buf, n, dropped) are never read, so skipping them is exact.
				if end, ok := wholeCSI(data, i); ok {
					params := data[i+2 : end]
					if queries != nil && len(params) <= maxCollect && isCSIQuery(params, data[end]) {
						*queries = append(*queries, span{off + int64(i), off + int64(end) + 1})
					}
					i = end + 1
					continue
				}
			}
		}
		if p.state == stCSI {
			// Parameter and intermediate bytes only accumulate: take the whole run.
			j := i
			for j < len(data) && data[j] >= 0x20 && data[j] <= 0x3f {
				j++
			}
			p.collectRun(data[i:j])
			if i = j; i == len(data) {
				return
			}
		}
		if q, start := p.step(data[i], off+int64(i)); q && queries != nil {
			*queries = append(*queries, span{start, off + int64(i) + 1})
		}
		i++
	}
}

// wholeCSI reports whether data[i:] begins with a complete CSI sequence made of ESC [,
// parameter and intermediate bytes only (no C0 control, ESC, CAN or SUB inside), and
// the index of its final byte.
func wholeCSI(data []byte, i int) (end int, ok bool) {
	if i+2 >= len(data) || data[i+1] != '[' {
		return 0, false
	}
	j := i + 2
	for j < len(data) && data[j] >= 0x20 && data[j] <= 0x3f {
		j++
	}
	if j < len(data) && data[j] >= 0x40 && data[j] <= 0x7e {
		return j, true
	}
	return 0, false
}

// utf8Tail reports whether every byte of c is a UTF-8 continuation byte.
func utf8Tail(c []byte) bool {
	for _, b := range c {
		if b < 0x80 || b > 0xbf {
			return false
		}
	}
	return true
}
