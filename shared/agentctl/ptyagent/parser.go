package ptyagent

import (
	"strings"
	"unicode/utf8"
)

// Markers of the demo agent's terminal convention.
const (
	PromptMarker    = "demo> "
	ReplyMarker     = "agent: "
	CancelledMarker = "[turn cancelled]"
)

// Parser turns a terminal byte stream into reply and prompt callbacks.
// It strips ANSI escape sequences and carriage returns. Not safe for
// concurrent use; feed it from one goroutine.
type Parser struct {
	// OnReply is called with the whole reply text so far; final is true
	// when the reply line has ended.
	OnReply func(text string, final bool)
	// OnReplyStart is called when a reply line begins (the turn has started).
	OnReplyStart func()
	// OnPrompt is called when the agent shows its input prompt.
	OnPrompt func()
	// OnCancelled is called when the agent reports a cancelled turn.
	OnCancelled func()
	// OnInput is called with a line typed at the agent's prompt (its echo,
	// with erased characters removed), whoever typed it.
	OnInput func(text string)

	line     []byte
	esc      int // 0 none, 1 after ESC, 2 in CSI, 3 in OSC
	prompted bool
	replying bool
	lastSent string
}

// Feed parses more output.
func (p *Parser) Feed(b []byte) {
	for _, c := range b {
		switch p.esc {
		case 1:
			switch c {
			case '[':
				p.esc = 2
			case ']':
				p.esc = 3
			default:
				p.esc = 0
			}
			continue
		case 2:
			if c >= 0x40 && c <= 0x7e {
				p.esc = 0
			}
			continue
		case 3:
			if c == 0x07 {
				p.esc = 0
			} else if c == 0x1b {
				p.esc = 1
			}
			continue
		}
		switch c {
		case 0x1b:
			p.esc = 1
		case '\r':
		case '\n':
			p.endLine()
		case 0x08, 0x7f: // the echo of an erased character
			p.erase()
		default:
			p.line = append(p.line, c)
		}
	}
	p.partial()
}

func (p *Parser) partial() {
	s := string(p.line)
	switch {
	case s == PromptMarker && !p.prompted:
		p.prompted = true
		if p.OnPrompt != nil {
			p.OnPrompt()
		}
	case strings.HasPrefix(s, ReplyMarker):
		if !p.replying {
			p.replying = true
			if p.OnReplyStart != nil {
				p.OnReplyStart()
			}
		}
		text := cleanReply(s)
		if text != p.lastSent && p.OnReply != nil {
			p.lastSent = text
			p.OnReply(text, false)
		}
	}
}

func (p *Parser) endLine() {
	s := string(p.line)
	p.line = p.line[:0]
	p.prompted = false
	p.replying = false
	// A prompt line followed by typed input ("demo> remember x") is the echo.
	input, typed := strings.CutPrefix(s, PromptMarker)
	if typed && strings.TrimSpace(input) != "" && p.OnInput != nil {
		p.OnInput(strings.TrimSpace(input))
	}
	s = input
	switch {
	case strings.HasPrefix(s, ReplyMarker):
		if p.OnReply != nil {
			p.OnReply(cleanReply(s), true)
		}
	case strings.TrimSpace(strings.TrimPrefix(s, "^C")) == CancelledMarker:
		if p.OnCancelled != nil {
			p.OnCancelled()
		}
	}
	p.lastSent = ""
}

// erase removes the last character of the line (UTF-8 aware).
func (p *Parser) erase() {
	if len(p.line) == 0 {
		return
	}
	_, n := utf8.DecodeLastRune(p.line)
	p.line = p.line[:len(p.line)-n]
}

func cleanReply(s string) string {
	s = strings.TrimPrefix(s, ReplyMarker)
	return strings.TrimSuffix(s, "^C")
}
