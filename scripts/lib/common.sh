# Shared by scripts/lib/ensure-*.sh (sourced, not run). Messages go to stderr, prefixed [tern].

log() { printf '[tern] %s\n' "$*" >&2; }
die() { printf '[tern] error: %s\n' "$*" >&2; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }

# Hides the password of a URL in messages.
redact() { sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#' <<<"$1"; }

# apt-get install, with `apt-get update` only when the first attempt fails.
# INSTALL_HINT says what the user can do instead (e.g. "set DATABASE_URL").
apt_install() {
  local hint="${INSTALL_HINT:-install it yourself}"
  [ "$(id -u)" -eq 0 ] || die "need root to install $* (or $hint)"
  have apt-get || die "apt-get not found; install $* yourself (or $hint)"
  local out
  out="$(mktemp)"
  log "installing $* (apt-get)"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >"$out" 2>&1; then
    log "apt-get install failed; running apt-get update and retrying"
    if ! { DEBIAN_FRONTEND=noninteractive apt-get update -q &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"; } >"$out" 2>&1; then
      tail -n 30 "$out" >&2
      rm -f "$out"
      die "could not install $*"
    fi
  fi
  rm -f "$out"
}
