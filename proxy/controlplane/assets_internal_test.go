package controlplane

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestAssetsDirName: the default asset directory is the setup-envtest
// store's for the platform the binary runs on, not always Linux's.
func TestAssetsDirName(t *testing.T) {
	v := strings.TrimPrefix(KubernetesVersion, "v")
	for _, tc := range []struct{ goos, goarch, want string }{
		{"linux", "amd64", v + "-linux-amd64"},
		{"linux", "arm64", v + "-linux-arm64"},
		{"darwin", "amd64", v + "-darwin-amd64"},
		{"darwin", "arm64", v + "-darwin-arm64"},
	} {
		if got := assetsDirName(tc.goos, tc.goarch); got != tc.want {
			t.Errorf("assetsDirName(%q, %q) = %q, want %q", tc.goos, tc.goarch, got, tc.want)
		}
	}

	data := t.TempDir()
	t.Setenv("XDG_DATA_HOME", data)
	want := filepath.Join(data, "kubebuilder-envtest", "k8s", v+"-"+runtime.GOOS+"-"+runtime.GOARCH)
	if got := DefaultAssetsDir(); got != want {
		t.Errorf("DefaultAssetsDir() with XDG_DATA_HOME=%s = %q, want %q", data, got, want)
	}
}
