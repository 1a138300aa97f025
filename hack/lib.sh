# lib.sh: helpers shared by the fuzz scripts. Sourced, not run.

# fresh_copy DIR TARGET PKG: copies the working tree (without .git) into DIR and
# removes TARGET's committed corpus there, so that a campaign in DIR starts from
# an empty corpus without touching the repository.
fresh_copy() {
	local dir=$1 target=$2 pkg=$3 top
	top=$(git rev-parse --show-toplevel)
	tar -C "$top" --exclude=.git -cf - . | tar -C "$dir" -xf -
	rm -rf "$dir/${pkg#./}/testdata/fuzz/$target"
}
