#!/usr/bin/env bash
# Screenshots of the real fleetop TUI for the README.
#
# Each shot runs `fleetop demo` in a detached tmux session of an exact size,
# sends some keys, captures the pane with its colours (`capture-pane -e`) and
# renders it to screenshots/NAME.png with scripts/ansi2png.py.
#
#   scripts/screenshots.sh                  # build, then every shot
#   SKIP_BUILD=1 scripts/screenshots.sh     # use the existing target/release/fleetop
#   ONLY="heatmap help" scripts/screenshots.sh
#   SKIP_BUILD=1 FLEETOP_BIN=target/debug/fleetop scripts/screenshots.sh
#   TITLE=1 FONT_SIZE=16 scripts/screenshots.sh   # window title bar, bigger font
#
# Installs what is missing: Pillow (pip), fonts-dejavu-core and tmux (apt).
set -euo pipefail

# settle: seconds to let the fleet fill in after the first frame, before the keys.
# theme "default" passes no --theme flag.
# name             cols rows nodes theme      settle keys (tmux send-keys names; - for none)
SHOTS=(
  "heatmap           120  36    32 default     2     -"
  "heatmap-80x24      80  24    32 default     2     -"
  "dense-wall        160  45  1024 default    50     -"
  "node-detail       160  45    32 default     2     Tab Enter"
  "node-detail-mi300x 160 45    32 default     2     : n o d e Space g p u 2 8 Enter 2"
  "alerts            120  36    32 default     2     Tab"
  "help              100  30    32 default     2     ?"
  "groups            120  36    32 default     2     J"
  "burn-in           120  30     4 default     2     Space Space Space Space B y"
  "theme-light       120  36    32 light       2     -"
  "theme-colorblind  120  36    32 colorblind  2     -"
)
GPUS=8
SEED=7
FONT_SIZE=${FONT_SIZE:-14}
SETTLE=1.5     # seconds between the last key and the capture
# The first frame must show "fleetop" within 10 s plus 1 s per 25 nodes (agents start first).
KEY_DELAY=0.3  # seconds between keys

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BIN=${FLEETOP_BIN:-$ROOT/target/release/fleetop}   # FLEETOP_BIN: another build (SKIP_BUILD=1 too)
OUT=$ROOT/screenshots
SOCK=fleetop-shots-$$   # a private tmux server: never touches the user's sessions
WORK=$(mktemp -d)
unset TMUX

tm() { tmux -L "$SOCK" -f "$WORK/tmux.conf" "$@"; }
cleanup() {
  tmux -L "$SOCK" kill-server 2>/dev/null || true
  rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$SOCK"   # tmux can leave the socket behind
  rm -f "$OUT"/*.ans
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_install() {
  echo "screenshots: installing $* (apt-get)"
  as_root apt-get install -y "$@" || { as_root apt-get update && as_root apt-get install -y "$@"; }
}

# --- dependencies -----------------------------------------------------------
command -v tmux >/dev/null || apt_install tmux
if ! python3 -c 'import PIL' 2>/dev/null; then
  echo "screenshots: installing pillow (pip)"
  python3 -m pip install --quiet pillow
fi
font=$(fc-match -f '%{file}' 'DejaVu Sans Mono' 2>/dev/null || true)
if [[ $font != *DejaVuSansMono* && ! -f /usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf ]]; then
  apt_install fonts-dejavu-core
fi
term=tmux-256color
infocmp "$term" >/dev/null 2>&1 || term=screen-256color

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cargo build --release --bin fleetop
fi
[ -x "$BIN" ] || { echo "screenshots: $BIN missing (build it, or drop SKIP_BUILD)" >&2; exit 1; }

# Truecolour: tmux keeps 24-bit colours in its grid and capture-pane -e writes
# them back as 38;2;r;g;b. Tc only matters for a client that attaches later.
cat >"$WORK/tmux.conf" <<EOF
set -g default-terminal $term
set -ga terminal-overrides ',*:Tc'
set -g status off
set -g remain-on-exit on
EOF
mkdir -p "$OUT" "$WORK/config"

pane() { tm display-message -p -t "$1" "$2" 2>/dev/null || echo gone; }
alive() { [ "$(pane "$1" '#{pane_dead}')" = 0 ]; }
pane_text() { tm capture-pane -p -t "$1" 2>/dev/null || true; }

fail() {  # fail NAME WHY: report, show what the pane said, drop the session
  echo "screenshots: $1: $2:" >&2
  tm capture-pane -p -S - -t "$1" 2>/dev/null | sed '/^ *$/d; s/^/    /' | tail -n 12 >&2 || true
  tm kill-session -t "$1" 2>/dev/null || true
  return 1
}

# shoot NAME COLS ROWS NODES THEME SETTLE KEYS...: returns non-zero on failure.
# (It runs as `shoot || ...`, where set -e is off, so every step checks itself.)
shoot() {
  local name=$1 cols=$2 rows=$3 nodes=$4 theme=$5 settle=$6; shift 6
  local args=(demo --nodes "$nodes" --gpus "$GPUS" --seed "$SEED")
  [ "$theme" = default ] || args+=(--theme "$theme")
  echo "screenshots: $name (${cols}x${rows}): fleetop ${args[*]}; keys: ${*:--}"

  tm new-session -d -s "$name" -x "$cols" -y "$rows" -c "$ROOT" \
    -e TERM=xterm-256color -e COLORTERM=truecolor -e XDG_CONFIG_HOME="$WORK/config" \
    "$BIN" "${args[@]}" || return 1

  local deadline=$((SECONDS + 10 + nodes / 25))
  until alive "$name" && pane_text "$name" | grep -q fleetop; do   # (clap's errors say fleetop too)
    alive "$name" || { fail "$name" "fleetop exited (status $(pane "$name" '#{pane_dead_status}'))"; return 1; }
    [ $SECONDS -lt $deadline ] || { fail "$name" "no frame showing \"fleetop\" in time"; return 1; }
    sleep 0.2
  done
  sleep "$settle"
  local key
  for key in "$@"; do
    [ "$key" = - ] || tm send-keys -t "$name" "$key"
    sleep "$KEY_DELAY"
  done
  sleep "$SETTLE"
  alive "$name" || { fail "$name" "fleetop exited after the keys"; return 1; }
  tm capture-pane -e -p -t "$name" >"$OUT/$name.ans" || { fail "$name" "capture failed"; return 1; }

  tm send-keys -t "$name" q
  local i
  for ((i = 0; i < 30; i++)); do alive "$name" || break; sleep 0.1; done
  alive "$name" && echo "screenshots: $name: still running 3 s after q; killing it" >&2
  tm kill-session -t "$name" 2>/dev/null

  local title=()
  [ "${TITLE:-0}" = 1 ] && title=(--title "fleetop ${args[*]}")
  python3 scripts/ansi2png.py "$OUT/$name.ans" "$OUT/$name.png" \
    --cols "$cols" --rows "$rows" --font-size "$FONT_SIZE" "${title[@]}" || return 1
  rm -f "$OUT/$name.ans"
  echo "screenshots: wrote screenshots/$name.png"
}

failed=()
for shot in "${SHOTS[@]}"; do
  read -r name cols rows nodes theme settle keys <<<"$shot"
  read -ra keys <<<"$keys"   # read -a: no glob expansion of keys like '?'
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then continue; fi
  shoot "$name" "$cols" "$rows" "$nodes" "$theme" "$settle" "${keys[@]}" || failed+=("$name")
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "screenshots: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "screenshots: all done"
