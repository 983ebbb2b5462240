package term

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
