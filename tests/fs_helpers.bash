# fs_helpers.bash — for the suites that write into folders they cannot
# write to (checkpoint.bats, reliability.bats); `load fs_helpers`.

# cleanup_fs: unmounts what a test mounted below its temporary folder and
# removes SHARED_DIR (call it from teardown).
cleanup_fs() {
  local m
  for m in $(awk -v d="$BATS_TEST_TMPDIR" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  if [ -n "${SHARED_DIR:-}" ]; then chmod -R u+w "$SHARED_DIR"; rm -rf "$SHARED_DIR"; fi
}

# as_nobody: sets AS to the command prefix that drops root's privileges
# (root ignores permissions; as another user it is empty).  Skips the test
# when it cannot.
as_nobody() {
  AS=()
  if [ "$(id -u)" = 0 ]; then
    command -v setpriv >/dev/null || skip "running as root without setpriv to drop privileges"
    AS=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  fi
}

# shared_dir: SHARED_DIR, a new folder every user can reach.
shared_dir() {
  SHARED_DIR=$(mktemp -d /tmp/netrun-test.XXXXXX)
  chmod 755 "$SHARED_DIR"
}
