package operator

// SummaryHelp is the example of the summary that both tools' redeliver
// help shows, in the words Summary.Write prints.
const SummaryHelp = `summary: 1000 letters waiting, 700 selected, 700 sent
  delivered: 690 (answered 201 Created: 680; reconciled: 10)
  not delivered: 10 (answered 503 Service Unavailable: 10)
  not sent: 1 (not due: 1)
  left, refused: 100 (the funder refused them; ...)
  left, not due: 100 (the next is due at 2026-12-05T00:12:00Z)
  left, late: 50 (they missed their closing time; ...)
  left, ambiguous: 50 (ask the funder first, or -trust-key ...)
  left, another's: 3 (another process or worker holds them, ...)
  not tried: 0
`

// ExitStatusHelp is the exit status paragraph of both tools' redeliver
// help: what ExitCode makes of Run.Redeliver's error.
const ExitStatusHelp = `Exit status: 0 when every letter the run sent, and every letter named,
was delivered (the letters -all leaves are no failure); 1 when a letter
sent or named was not delivered, could not be read or sent, or the run
was stopped; 2 when the command is called wrongly, sending nothing.
`
