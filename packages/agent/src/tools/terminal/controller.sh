# The terminal's controller: one `docker exec` of this script per terminal call (tools/terminal/session.ts).
#
# The conversation's shell is an interactive bash in a tmux session whose server lives in the
# sandbox, so it outlives any worker. Its state lives in $TERN_D, a small tmpfs outside the
# workspace's disk limit: the tmux socket, each command's program, its exit status, and each
# call's result. A full workspace disk therefore never keeps the agent from reading a result.
#
# Each call is claimed once by its ActionEvent id (`act/<id>.claim`, made with O_EXCL): the first controller sends
# the command or keys and writes the call's result there; a later one (a worker that took the run
# over) never sends anything again: it waits for that result, or takes over the waiting itself
# when the first controller is gone.
#
# Inputs (environment): TERN_D, TERN_MODE (run|input|poll|reset|interrupt), TERN_ACTION,
# TERN_TEXT, TERN_KEY (a tmux key name for a special key), TERN_ENTER, TERN_HARD_MS (0: none),
# TERN_NOCHANGE_MS, TERN_MAX (bytes of new output returned), TERN_CWD, TERN_ATTACH_MS (0: wait
# for the result as long as it takes), TERN_DISK_CLAIMS (a directory on the sandbox's disk where a
# claim is also marked, so a container restart that wiped the tmpfs still never runs it twice).
# The rest of the environment (the user's secrets) becomes the shell's, when this call starts it.
#
# Output: `TERN_TERM <status> <exit_code> <cut_bytes> <new_shell>`, then the working directory,
# the Python interpreter, the file holding the whole output (when cut), and the new output.
set -u
D=$TERN_D
S=$D/tmux.sock
A=${TERN_ACTION:-}
# tern's own tmux (the tools' directory, in a sandbox of any image) before the image's.
TMUX_BIN=tmux
[ -x /opt/tern/bin/tmux ] && TMUX_BIN=/opt/tern/bin/tmux
T() { "$TMUX_BIN" -S "$S" "$@"; }
[ -d "$D" ] || mkdir -p "$D"

now() { local t=${EPOCHREALTIME//[.,]/}; NOW=$((t / 1000)); }

# Sleeps without a process per nap: a read that times out on a FIFO nobody writes.
[ -p "$D/nap" ] || mkfifo "$D/nap" 2>/dev/null
exec {NAP}<>"$D/nap"
nap() { read -r -t "$1" -u "$NAP" _ 2>/dev/null; }

# The shell's start-up: the user's bashrc, then ours. PS1 is a marker line: the screen ends with it
# once bash has printed everything the command wrote, and is ready for the next one.
write_rc() {
  cat >"$D/rc.sh" <<EOF
[ -f ~/.bashrc ] && . ~/.bashrc
set +H
export PAGER=cat GIT_PAGER=cat VIRTUAL_ENV_DISABLE_PROMPT=1
PS1='\n#tern# '
PS2=''
__tern_prompt() {
  local e=\$?
  if [ -n "\${__tern_id:-}" ]; then
    { printf '%s\n%s\n' "\$e" "\$PWD"; command -v python; } >"$D/cmd/\$__tern_id.exit"
    __tern_id=
  fi
  return \$e
}
PROMPT_COMMAND=__tern_prompt
: >"$D/ready"
EOF
}

session_alive() { T has-session -t main 2>/dev/null; }

NEW_SHELL=0
start_session() {
  mkdir -p "$D/cmd" "$D/act" "$D/out"
  [ -n "${TERN_DISK_CLAIMS:-}" ] && mkdir -p "$TERN_DISK_CLAIMS" 2>/dev/null
  [ -e "$D/started" ] && NEW_SHELL=1
  write_rc
  rm -f "$D/ready" "$D/busy"
  local d=$D cwd=${TERN_CWD:-/}
  [ -d "$cwd" ] || cwd=/
  # The server takes this environment (the user's secrets), without the controller's own variables.
  (
    unset "${!TERN_@}" NAP
    exec "$TMUX_BIN" -S "$d/tmux.sock" -f /dev/null start-server \; set-option -g history-limit 10000 \; \
      set-option -g exit-empty on \; new-session -d -s main -x 256 -y 200 -c "$cwd" \
      "exec bash --noprofile --rcfile $d/rc.sh -i"
  ) 2>"$D/tmux.err" || return 1
  local i
  for ((i = 0; i < 500; i++)); do
    [ -e "$D/ready" ] && break
    nap 0.01
  done
  T send-keys -t main -R \; clear-history -t main
  : >"$D/started"
}


# The pane as text: its whole history, wrapped lines joined, trailing blank lines gone.
capture() {
  CAP=$(T capture-pane -p -J -S - -E - -t main 2>/dev/null)
  CAP=${CAP%"${CAP##*[! ]}"}
}

# The running command's output so far: the screen after the line that started it, without the
# final prompt marker.
command_output() {
  local out=$CAP
  case $out in
    *$'\n'*) out=${out#*$'\n'} ;;
    *) out= ;;
  esac
  if [[ $out == *"#tern#" ]]; then
    out=${out%"#tern#"}
    out=${out%$'\n'}
    out=${out%$'\n'}
  fi
  OUT=$out
}

prompt_shown() { [[ $CAP == *"#tern#" ]]; }

RESULT=
# result <status> <exit_code> <new_text>: cut to TERN_MAX bytes (the whole kept in out/), as the
# call's result.
result() {
  local status=$1 ec=$2 text=$3 cut=0 saved= cwd= py=
  if [ "${#text}" -gt "$TERN_MAX" ]; then
    saved=$D/out/$A.txt
    printf '%s\n' "$text" >"$saved" 2>/dev/null || saved=
    local half=$((TERN_MAX / 2))
    cut=$((${#text} - 2 * half))
    text="${text:0:half}"$'\n'"TERN_CUT_MARK"$'\n'"${text: -half}"
  fi
  if [ -n "${CUR:-}" ] && [ -f "$D/cmd/$CUR.exit" ]; then
    { read -r _; read -r cwd; read -r py; } <"$D/cmd/$CUR.exit"
  fi
  RESULT="TERN_TERM $status $ec $cut $NEW_SHELL"$'\n'"$cwd"$'\n'"$py"$'\n'"$saved"$'\n'"$text"
}

finish() {
  if [ -n "$A" ]; then
    # The result, then its mark: a reader waits for the mark, never reads half a result.
    printf '%s' "$RESULT" >"$D/act/$A.result" && : >"$D/act/$A.done"
  fi
  printf '%s' "$RESULT"
  exit 0
}

# The command now running in the shell (its id), or nothing.
running() {
  CUR=
  [ -f "$D/busy" ] || return 1
  read -r CUR <"$D/busy" || return 1
  [ -n "$CUR" ] && [ ! -f "$D/cmd/$CUR.exit" ]
}

# What the command printed since the last call about it showed (OpenHands' removeprefix).
new_output() {
  local prev=
  [ -f "$D/cmd/$CUR.prev" ] && IFS= read -r -d '' prev <"$D/cmd/$CUR.prev"
  command_output
  if [ -n "$prev" ] && [[ $OUT == "$prev"* ]]; then NEW=${OUT:${#prev}}; else NEW=$OUT; fi
  NEW=${NEW#$'\n'}
  printf '%s' "$OUT" >"$D/cmd/$CUR.prev"
}

# Waits for the running command CUR to end, to print nothing new for TERN_NOCHANGE_MS, or for
# TERN_HARD_MS to pass; writes the call's result.
wait_command() {
  local started last_change last_cap= naps=0 seen_exit=0 ec
  now
  started=$NOW
  last_change=$NOW
  local next_capture=$((NOW + 200))
  while :; do
    if [ -f "$D/cmd/$CUR.exit" ]; then
      capture
      # bash writes the exit file just before its prompt; the prompt on screen means everything
      # the command printed is there too.
      if prompt_shown || [ "$seen_exit" -gt 200 ]; then
        read -r ec <"$D/cmd/$CUR.exit"
        new_output
        rm -f "$D/busy"
        result completed "$ec" "$NEW"
        return
      fi
      seen_exit=$((seen_exit + 1))
      nap 0.005
      continue
    fi
    now
    if [ "$NOW" -ge "$next_capture" ]; then
      if ! session_alive; then
        new_output 2>/dev/null
        rm -f "$D/busy"
        result exited -1 "$OUT"
        return
      fi
      capture
      if [ "$CAP" != "$last_cap" ]; then
        last_cap=$CAP
        last_change=$NOW
      fi
      next_capture=$((NOW + 250))
    fi
    if [ "$TERN_HARD_MS" -gt 0 ] && [ $((NOW - started)) -ge "$TERN_HARD_MS" ]; then
      new_output
      result hard_timeout -1 "$NEW"
      return
    fi
    if [ "$TERN_HARD_MS" -eq 0 ] && [ $((NOW - last_change)) -ge "$TERN_NOCHANGE_MS" ]; then
      new_output
      result no_change -1 "$NEW"
      return
    fi
    # Often at first (most commands end within milliseconds), then less.
    naps=$((naps + 1))
    if [ "$naps" -le 40 ]; then nap 0.003; elif [ "$naps" -le 80 ]; then nap 0.02; else nap 0.1; fi
  done
}

if [ "$TERN_MODE" = interrupt ]; then
  # Ctrl-C to whatever runs in the shell; nothing is claimed (a second one is harmless). With an
  # action, then that call's result, as a later call of it would read it.
  session_alive && running && T send-keys -t main C-c
  if [ -z "$A" ] || [ ! -f "$D/act/$A.claim" ]; then
    printf 'TERN_TERM sent 0 0 0\n\n\n\n'
    exit 0
  fi
fi

# A sandbox from an image older than the live terminal: the caller runs the command another way.
if ! command -v "$TMUX_BIN" >/dev/null 2>&1; then
  printf 'TERN_TERM notmux -1 0 0\n\n\n\n'
  exit 0
fi

claim=$D/act/$A
[ -d "$D/act" ] || mkdir -p "$D/act" 2>/dev/null
# The claim: created only if absent (noclobber is O_EXCL), holding its controller's pid.
set -C
CLAIMED=0
{ echo $$ >"$claim.claim"; } 2>/dev/null && CLAIMED=1
set +C
if [ "$CLAIMED" = 0 ]; then
  # Claimed before: never send it again. Its result, once its controller writes it.
  waited=0
  while :; do
    if [ -f "$claim.done" ]; then
      cat "$claim.result"
      exit 0
    fi
    owner=
    read -r owner <"$claim.claim"
    if [ -z "$owner" ] || ! kill -0 "$owner" 2>/dev/null; then
      # Its controller is gone without a result (it cannot be, short of a kill inside the
      # sandbox): take the waiting over when the call was sent, else say what happened.
      echo $$ >"$claim.claim"
      if [ -f "$claim.sent" ] && session_alive && running; then
        wait_command
        finish
      fi
      CUR=
      result lost -1 ""
      finish
    fi
    if [ "${TERN_ATTACH_MS:-0}" -gt 0 ] && [ "$waited" -ge "$TERN_ATTACH_MS" ]; then
      printf 'TERN_TERM pending -1 0 0\n\n\n\n'
      exit 0
    fi
    nap 0.02
    waited=$((waited + 20))
  done
fi
if [ -n "${TERN_DISK_CLAIMS:-}" ]; then
  # Marked on disk too (when the disk takes it): a restarted container has a fresh tmpfs.
  if [ -e "$TERN_DISK_CLAIMS/$A" ]; then
    CUR=
    result lost -1 ""
    finish
  fi
  : >"$TERN_DISK_CLAIMS/$A" 2>/dev/null
fi
# Now and then, results and outputs of calls long done go (the tmpfs is small).
if [ $((RANDOM % 50)) -eq 0 ]; then
  find "$D/act" "$D/cmd" "$D/out" -type f -mmin +720 -delete 2>/dev/null
fi

case $TERN_MODE in
  reset)
    T kill-server 2>/dev/null
    for ((i = 0; i < 100; i++)); do
      session_alive || break
      nap 0.01
    done
    CUR=
    start_session || { result error -1 "The terminal could not be started: $(head -c 2000 "$D/tmux.err" 2>/dev/null)"; finish; }
    NEW_SHELL=0
    result reset 0 ""
    finish
    ;;
  run)
    if running; then
      if session_alive; then
        capture
        new_output
        result refused -1 "$NEW"
        finish
      fi
      rm -f "$D/busy"
    fi
    [ -d "$D/cmd" ] || mkdir -p "$D/cmd"
    printf '%s\n' "$TERN_TEXT" >"$D/cmd/$A"
    : >"$D/cmd/$A.prev"
    CUR=$A
    : >"$claim.sent"
    # Typed into the shell: a screen cleared, then one short line that runs the program in it.
    type_command() {
      T send-keys -t main -R \; clear-history -t main \; send-keys -t main -l "__tern_id=$A; . $D/cmd/$A" \; \
        send-keys -t main Enter 2>/dev/null
    }
    if ! type_command; then
      start_session || { result error -1 "The terminal could not be started: $(head -c 2000 "$D/tmux.err" 2>/dev/null)"; finish; }
      type_command
    fi
    echo "$A" >"$D/busy"
    wait_command
    finish
    ;;
  input | poll)
    if ! session_alive || ! running; then
      CUR=
      result idle -1 ""
      finish
    fi
    if [ "$TERN_MODE" = input ]; then
      : >"$claim.sent"
      if [ -n "${TERN_KEY:-}" ]; then
        T send-keys -t main "$TERN_KEY"
      else
        T send-keys -t main -l "$TERN_TEXT"
        [ "${TERN_ENTER:-1}" = 1 ] && T send-keys -t main Enter
      fi
    fi
    wait_command
    finish
    ;;
esac
printf 'TERN_TERM error -1 0 0\n\n\n\nunknown mode %s\n' "$TERN_MODE"
