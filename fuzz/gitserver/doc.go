// Package gitserver serves git repositories over smart HTTP on 127.0.0.1, with
// git's own http-backend behind net/http/cgi, so that a controller under test
// clones from a real git server without network access. A target file's
// fixtures.git (package fuzz/target) and the FluxCD scenario serve their
// repositories with it.
//
// It needs the git command (Debian's git package); it reads no environment
// variables of its own and sets GIT_PROJECT_ROOT and GIT_HTTP_EXPORT_ALL for
// the backend.
//
// Contract: CreateRepository makes a bare repository with one commit; Start
// serves every bare repository under its root on a port of 127.0.0.1 until
// Stop, which waits for the server.
package gitserver
