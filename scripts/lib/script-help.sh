# Sourced by the user-facing scripts, before they change folder: `-h` / `--help`
# prints the script's header comment (its usage and what it does) and exits 0,
# so that help never falls through to an argument (ptxas-report.sh once took
# --help for its OUT path and made a folder named after dirname's usage text).
#   source "$(dirname "$0")/lib/script-help.sh"
#   script_help_if_asked "$@"     or, in a script's own option loop: -h|--help) script_help; exit 0 ;;
yoco_script_path=$(readlink -f -- "$0")
script_help() {
  awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$yoco_script_path"
}
script_help_if_asked() {
  local a
  for a in "$@"; do
    case "$a" in -h|--help) script_help; exit 0 ;; esac
  done
}
