// SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGPIPE (docs/cli.md "Exit codes"): a thread of its own waits for
// them (they are blocked in every other thread), so the cleanup runs outside a signal handler: it stops
// the child processes the command started, removes every output temporary (fp4sim::remove_temporaries)
// and ends the process with 128 + the signal number (130, 143, 129, 131, 141).
#pragma once

#include <sys/types.h>

namespace fp4sim::cli {

// Call first in run() (run.hpp), before any other thread exists (threads inherit the blocked signals).
void handle_interrupts();

// A child process the command waits for: stopped (SIGTERM, then reaped) when the command is interrupted.
void track_child(pid_t pid);
void untrack_child(pid_t pid);

// In a forked child before exec: the signals handle_interrupts() blocked, unblocked again, but the
// terminal's SIGINT and SIGQUIT ignored. Ctrl-C reaches the whole foreground process group; this process
// gets it too and stops the child itself, so the child (a Python script) prints no traceback of its own.
void prepare_child_signals();

// For a command whose child ended with wait status `status`: when a signal above ended it, that signal
// went to the whole process group (mpirun and batch systems signal a rank's group) and reached the child
// before this process's own thread ran: the command ends as that thread ends it (whichever comes first
// ends the process, the other waits, so one line is printed). Otherwise returns.
void end_if_interrupted(int status);

}  // namespace fp4sim::cli
