// Package reaper starts child processes that cannot outlive the process that
// started them, and removes a directory with them.
//
// # Guarantee
//
// A process started with Reaper.Start, or through a path Reaper.Shim wrote,
// and every process in its process group, is killed (SIGKILL) when the
// process that created the Reaper ends without calling Stop, however it ends:
// a panic, os.Exit, SIGINT, SIGTERM or SIGKILL. The Reaper's directory is then
// removed too, so files that must not outlive the process belong under it.
// Stop (the owner ending normally) kills whatever it still owns and removes
// the directory itself.
//
// How: New starts a small reaper process (sh, in its own process group,
// ignoring SIGINT, SIGTERM and SIGHUP) that holds the read end of a pipe
// whose write end only this process has. Every owned process is launched
// through a one-line shim that records its PID in the directory, as a file of
// its own, before it execs the binary, so the PID recorded is the binary's
// and is recorded before the binary runs. When the pipe closes without the
// word "stop", the reaper moves the records away (a shim that has not yet
// recorded its PID then exits without exec'ing), kills the process group of
// every PID recorded and removes the directory. A process started with Start
// is forgotten once it has exited and been waited for, so a reused PID is
// never killed.
//
// Owned processes are process group leaders, so a group kill also reaches
// what they started themselves, unless they moved it to a group of its own.
//
// # Platforms
//
// On Linux, a process started with Start also gets SIGKILL from the kernel
// the moment the thread that started it dies (Pdeathsig), before the reaper
// process acts; Gone and Running read /proc.
//
// On darwin (and any other Unix) there is no Pdeathsig: the reaper process
// alone kills the recorded process groups, which the guarantee above rests on
// everywhere. Gone and Running ask ps instead of /proc: Gone by the state ps
// reports, Running by the command path ps reports, which is the path the
// process was started by rather than the file it runs.
//
// Package reaper reads no environment variables of its own; on darwin it
// finds ps through PATH.
package reaper
