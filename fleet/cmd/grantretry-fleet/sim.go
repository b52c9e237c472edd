package main

import "io"

func runSim(args []string, stdout, stderr io.Writer) error { return usagef("sim: not built yet") }
