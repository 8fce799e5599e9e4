// SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGPIPE (docs/cli.md "Exit codes"): a thread of its own waits for
// them (they are blocked in every other thread), so the cleanup runs outside a signal handler: it stops
// the child processes the command started, removes every output temporary (fp4sim::remove_temporaries)
// and ends the process with 128 + the signal number (130, 143, 129, 131, 141).
#pragma once

#include <sys/types.h>

namespace fp4sim::cli {

// Call first in main(), before any other thread exists (threads inherit the blocked signals).
void handle_interrupts();

// A child process the command waits for: stopped (SIGTERM, then reaped) when the command is interrupted.
void track_child(pid_t pid);
void untrack_child(pid_t pid);

// In a forked child before exec: the signals handle_interrupts() blocked, unblocked again.
void unblock_interrupts();

}  // namespace fp4sim::cli
