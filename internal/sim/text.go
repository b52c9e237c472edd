package sim

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// TextWidth is the most columns a line of a report's text takes: the
// terminal's share. The Markdown has the wide tables.
const TextWidth = 100

// wrap breaks each line of s into lines of at most width columns, at
// spaces, indenting the lines it adds by indent columns. A word longer
// than a line is left whole.
func wrap(s string, width, indent int) string {
	var b strings.Builder
	for i, line := range strings.Split(s, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		col := 0
		for j, word := range strings.Fields(line) {
			n := utf8.RuneCountInString(word)
			switch {
			case j == 0:
				lead := len(line) - len(strings.TrimLeft(line, " "))
				b.WriteString(strings.Repeat(" ", lead))
				col = lead
			case col+1+n > width:
				b.WriteString("\n" + strings.Repeat(" ", indent))
				col = indent
			default:
				b.WriteByte(' ')
				col++
			}
			b.WriteString(word)
			col += n
		}
	}
	return b.String()
}

// writeChecks writes a block of targets as text: its title, then one
// line a check, the verdicts in a column and each check's text wrapped
// beside them.
func writeChecks(b *strings.Builder, title string, checks []Check) {
	fmt.Fprintf(b, "\n%s\n", wrap(title+":", TextWidth, 2))
	w := 0
	for _, c := range checks {
		w = max(w, len(c.Verdict()))
	}
	indent := strings.Repeat(" ", w+4)
	for _, c := range checks {
		text := wrap(c.Text, TextWidth-len(indent), 0)
		fmt.Fprintf(b, "  %-*s  %s\n", w, c.Verdict(), strings.ReplaceAll(text, "\n", "\n"+indent))
	}
}

// tableWidth is the columns the widest line of a table takes, its cells
// two spaces apart as writeTabbed and a tabwriter lay them out.
func tableWidth(rows ...[]string) int {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	total := 0
	for _, w := range widths {
		total += w + 2
	}
	return max(total-2, 0)
}

// writeMarkdownChecks writes a block of targets as a Markdown list.
func writeMarkdownChecks(b *strings.Builder, title string, checks []Check) {
	fmt.Fprintf(b, "\n%s:\n\n", title)
	for _, c := range checks {
		fmt.Fprintf(b, "- %s: %s\n", c.Verdict(), c.Text)
	}
}
