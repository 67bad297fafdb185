"""Layer 2, sessions: session files and their counters, the restart and two-writer runners, crash repair, S3 sessions,
the local AWS endpoint and the load run. Imports from `support` and `models`, never from `memory` or `measure`."""
