# Sourced by scripts/venv.sh and scripts/build_vision_msgs.sh: set-up prerequisites and progress for long steps.
#
#   check_prerequisites PYTHON VENV_PARENT NEED_BUILD   fail before anything is downloaded when something is missing
#   run_logged LABEL EXPECTED LOG CMD...                 run CMD with its output in LOG, printing the expected duration
#                                                         and the log path first, then a heartbeat every
#                                                         $VRT_PROGRESS_S seconds (default 30); on failure the log's
#                                                         tail and its path
# Disk needed by a fresh .venv plus the vision_msgs build folder, MiB (measured: .venv 520 MiB, build/ 40 MiB).
VRT_DISK_NEEDED_MB=${VRT_DISK_NEEDED_MB:-600}

check_prerequisites() {
  local python="$1" parent="$2" need_build="$3" missing=()
  if ! command -v "$python" >/dev/null; then
    missing+=("Python >= 3.10 ('$python' not found; set PYTHON=python3.11 or similar)")
  elif ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    missing+=("Python >= 3.10 ($python is $("$python" -V 2>&1); set PYTHON=...)")
  elif ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
    missing+=("the venv module with ensurepip (Debian/Ubuntu: apt-get install python3-venv, or python3.X-venv)")
  fi
  if [ "$need_build" = 1 ]; then
    command -v cmake >/dev/null || missing+=("cmake >= 3.16 (apt-get install cmake)")
    { command -v cc >/dev/null && command -v c++ >/dev/null; } \
      || missing+=("a C and C++ compiler (apt-get install g++)")
  fi
  local free_mb
  free_mb="$(df -Pm "$parent" 2>/dev/null | awk 'NR == 2 { print $4 }')"
  if [ -n "$free_mb" ] && [ "$free_mb" -lt "$VRT_DISK_NEEDED_MB" ]; then
    missing+=("${VRT_DISK_NEEDED_MB} MiB free disk in $parent (${free_mb} MiB free)")
  fi
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "venv: error: missing prerequisites (nothing was downloaded):" >&2
    printf 'venv:   - %s\n' "${missing[@]}" >&2
    exit 1
  fi
}

run_logged() {
  local label="$1" expected="$2" log="$3"
  shift 3
  mkdir -p "$(dirname "$log")"
  echo "  $label: $expected; log: $log"
  local start=$SECONDS every="${VRT_PROGRESS_S:-30}"
  "$@" >"$log" 2>&1 &
  local pid=$! next=$((SECONDS + every))
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ "$SECONDS" -ge "$next" ]; then
      # cmake prints "[ 42%] ..."; pip prints "Collecting x" / "Installing collected packages"
      local last
      last="$(grep -aoE '^\[ *[0-9]+%\]|^(Collecting|Downloading|Building wheel for|Installing collected packages)[^ ]* ?[^ ]*' "$log" | tail -1 || true)"
      echo "  $label: still running after $((SECONDS - start)) s${last:+ (last: $last)}; log: $log"
      next=$((SECONDS + every))
    fi
  done
  local rc=0
  wait "$pid" || rc=$?
  if [ "$rc" -ne 0 ]; then
    tail -40 "$log" >&2
    echo "  $label: FAILED after $((SECONDS - start)) s (exit $rc); full log: $log" >&2
    return "$rc"
  fi
  echo "  $label: done in $((SECONDS - start)) s"
}
