package report_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// chromiumBudget bounds one Chromium run.
const chromiumBudget = 60 * time.Second

// chromiumPath finds Chromium. Without it the test fails, telling how to get
// it, unless STALEFUZZ_NO_CHROMIUM=1 asks to skip the browser checks.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if os.Getenv("STALEFUZZ_NO_CHROMIUM") == "1" {
		t.Skip("STALEFUZZ_NO_CHROMIUM=1: the page is not checked in a browser")
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not found on PATH (%v): run `make deps` (hack/deps.sh installs it), or set STALEFUZZ_NO_CHROMIUM=1 to skip this test", err)
	}
	return p
}

// consoleLine matches what Chromium logs for a console message, an uncaught
// exception or a refused load ("INFO:CONSOLE:12] ..." or, in older
// versions, "INFO:CONSOLE(12)] ...").
var consoleLine = regexp.MustCompile(`CONSOLE[:(]|Uncaught|Refused to`)

func consoleLines(stderr []byte) []string {
	var out []string
	for _, l := range strings.Split(string(stderr), "\n") {
		if consoleLine.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

// browserRun runs name with args, Chromium or a script that runs it: in its
// own process group, with HOME, the XDG directories and TMPDIR in a
// directory of its own, under chromiumBudget. It checks that nothing it
// started outlives it and that it left nothing in the system's temporary
// directories.
func browserRun(t *testing.T, name string, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	// Not t.TempDir: Chromium makes a socket below TMPDIR, and a socket's
	// path must fit in 107 bytes.
	dir, err := os.MkdirTemp("", "sfb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	home, tmp := filepath.Join(dir, "h"), filepath.Join(dir, "t")
	for _, d := range []string{home, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Every process Chromium starts with its environment (the crash
	// handler runs in its own session) carries marker.
	marker := "STALEFUZZ_REPORT_BROWSER=" + dir
	shared := []string{os.TempDir(), "/dev/shm"}
	before := chromiumEntries(shared)

	ctx, cancel := context.WithTimeout(context.Background(), chromiumBudget)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_CACHE_HOME="+filepath.Join(home, ".cache"), "TMPDIR="+tmp, marker)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		t.Fatalf("unable to start %s: %v", name, err)
	}
	pgid := cmd.Process.Pid
	err = cmd.Wait()
	if ctx.Err() != nil {
		err = errors.Join(err, errors.New("over its budget of "+chromiumBudget.String()+"; its process group was killed"))
	}

	// Nothing survives: not in its process group, not elsewhere with its
	// environment. Give exiting children a moment; then end them and fail.
	deadline := time.Now().Add(5 * time.Second)
	for {
		group := syscall.Kill(-pgid, 0) == nil
		others := marked(marker)
		if !group && len(others) == 0 {
			break
		}
		if time.Now().After(deadline) {
			if group {
				t.Errorf("%s: processes of its group %d outlived it", name, pgid)
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
			for _, pid := range others {
				t.Errorf("%s: process %d it started outlived it", name, pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, e := range chromiumEntries(shared) {
		if !slices.Contains(before, e) {
			t.Errorf("%s left %s behind", name, e)
		}
	}
	return o.Bytes(), e.Bytes(), err
}

// marked lists the processes whose environment holds marker. It reads /proc:
// where there is none (darwin), it finds nothing, and only the process group
// check above catches a survivor.
func marked(marker string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && slices.ContainsFunc(bytes.Split(env, []byte{0}), func(v []byte) bool { return string(v) == marker }) {
			out = append(out, pid)
		}
	}
	return out
}

// chromiumEntries lists what looks like Chromium's in dirs.
func chromiumEntries(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			n := strings.ToLower(e.Name())
			if strings.Contains(n, "chromium") || strings.Contains(n, "chrome") || strings.HasPrefix(n, "scoped_dir") || strings.HasPrefix(n, "stalefuzz-screenshot") {
				out = append(out, filepath.Join(d, e.Name()))
			}
		}
	}
	return out
}

func fileURL(path string) string { return (&url.URL{Scheme: "file", Path: path}).String() }

// chromiumFlags keep a headless run to itself: its own profile and crash
// directory, its shared memory in its own TMPDIR rather than /dev/shm (where
// Chromium now and then leaves a segment behind when it exits), no first-run
// work, no background network services.
func chromiumFlags(dir string) []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--enable-logging=stderr", "--v=0",
		"--user-data-dir=" + filepath.Join(dir, "profile"), "--crash-dumps-dir=" + filepath.Join(dir, "crashes"),
		"--no-first-run", "--no-default-browser-check", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--disable-extensions"}
}

// TestChromiumRendersPage opens the page in headless Chromium: it loads
// without a console message (its Content-Security-Policy turns any fetch
// into one), the DOM Chromium built shows every lane and mark, and a
// screenshot (made by hack/screenshot.sh) shows the marks in their colours
// where the page put them.
func TestChromiumRendersPage(t *testing.T) {
	bin := chromiumPath(t)

	// Control: the console check sees a console message, so that its
	// silence below means something.
	ctl := t.TempDir()
	ctlPage := filepath.Join(ctl, "control.html")
	if err := os.WriteFile(ctlPage, []byte(`<!DOCTYPE html><title>control</title><script>console.error("stalefuzz-control")</script>`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := browserRun(t, bin, append(chromiumFlags(ctl), "--dump-dom", fileURL(ctlPage))...)
	if err != nil {
		t.Fatalf("chromium on a control page: %v\n%s", err, stderr)
	}
	if ls := consoleLines(stderr); len(ls) != 1 || !strings.Contains(ls[0], "stalefuzz-control") {
		t.Fatalf("chromium on a control page with one console.error: want one console line, got %q: the console check cannot be trusted\nstderr:\n%s", ls, stderr)
	}

	dir := t.TempDir()
	page := filepath.Join(dir, "page.html")
	if err := os.WriteFile(page, render(t, lostUpdate()), 0o644); err != nil {
		t.Fatal(err)
	}
	dom, stderr, err := browserRun(t, bin, append(chromiumFlags(dir), "--dump-dom", fileURL(page))...)
	if err != nil {
		t.Fatalf("chromium --dump-dom %s: %v\nstderr:\n%s", page, err, stderr)
	}
	if ls := consoleLines(stderr); len(ls) > 0 {
		t.Errorf("chromium --dump-dom %s: the page logged to the console:\n%s", page, strings.Join(ls, "\n"))
	}
	doc := parse(t, dom)
	if len(findTag(doc, "svg")) != 1 {
		t.Fatalf("chromium --dump-dom %s: want one <svg>, got %d; DOM:\n%.2000s", page, len(findTag(doc, "svg")), dom)
	}
	checkLostUpdate(t, doc)
	checkOffline(t, doc)
	// The page has no script of its own; should one appear, it reports its
	// errors on <html data-script-error>.
	if v, ok := attr(findTag(doc, "html")[0], "data-script-error"); ok {
		t.Errorf("the page's script failed: %s", v)
	}

	t.Run("screenshot", func(t *testing.T) {
		shot := filepath.Join(dir, "page.png")
		script, err := filepath.Abs("../../hack/screenshot.sh")
		if err != nil {
			t.Fatal(err)
		}
		out, stderr, err := browserRun(t, script, page, shot, "1400,900")
		if err != nil {
			t.Fatalf("hack/screenshot.sh %s %s: %v\nstdout: %s\nstderr:\n%s", page, shot, err, out, stderr)
		}
		f, err := os.Open(shot)
		if err != nil {
			t.Fatalf("hack/screenshot.sh wrote no PNG: %v", err)
		}
		defer f.Close()
		img, err := png.Decode(f)
		if err != nil {
			t.Fatalf("hack/screenshot.sh: %s is not a PNG: %v", shot, err)
		}
		if b := img.Bounds(); b.Dx() != 1400 || b.Dy() != 900 {
			t.Errorf("screenshot: want 1400×900, got %d×%d", b.Dx(), b.Dy())
		}
		// The held bar: the longest run of its colour on one row is the
		// bar, as wide as the page drew it.
		bar := one(t, "bar of the held event", findTag(find(doc, "event", "held")[0], "rect"))
		if got, want := longestRun(img, 0x1c, 0x7e, 0xd6), num(t, bar, "width"); got < int(want)-3 || got > int(want)+3 {
			t.Errorf("screenshot: the held bar is %d px wide, the page drew it %.1f px wide", got, want)
		}
		// The 409 is red, the blind write green, the fault violet.
		for _, c := range []struct {
			what    string
			r, g, b uint8
		}{{"409 Conflict", 0xe0, 0x31, 0x31}, {"blind write answered 200", 0x2f, 0x9e, 0x44}, {"request fault", 0x70, 0x48, 0xe8}, {"violation", 0xc2, 0x25, 0x5c}} {
			if n := countColour(img, c.r, c.g, c.b); n < 15 {
				t.Errorf("screenshot: %d pixels of the colour of a %s; want it drawn", n, c.what)
			}
		}
	})
}

func near(a uint32, b uint8) bool {
	d := int(a>>8) - int(b)
	return d > -10 && d < 10
}

func isColour(img image.Image, x, y int, r, g, b uint8) bool {
	cr, cg, cb, _ := img.At(x, y).RGBA()
	return near(cr, r) && near(cg, g) && near(cb, b)
}

func countColour(img image.Image, r, g, b uint8) int {
	n := 0
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			if isColour(img, x, y, r, g, b) {
				n++
			}
		}
	}
	return n
}

func longestRun(img image.Image, r, g, b uint8) int {
	best := 0
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		run := 0
		for x := bd.Min.X; x < bd.Max.X; x++ {
			if isColour(img, x, y, r, g, b) {
				run++
				best = max(best, run)
			} else {
				run = 0
			}
		}
	}
	return best
}
