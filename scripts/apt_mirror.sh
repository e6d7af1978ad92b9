#!/bin/sh
# Print the Debian archive URI this machine's apt uses (with --security: the security archive's),
# so that image and lab builds use the site's own mirror or proxy and no host name is written down.
#
#   scripts/apt_mirror.sh                   # the Debian archive, e.g. for debootstrap
#   scripts/apt_mirror.sh --security        # the security archive
#   scripts/apt_mirror.sh --root DIR        # read DIR/etc/apt/... and DIR/etc/os-release (tests)
#   scripts/apt_mirror.sh --codename trixie # match this release instead of the running one
#
# PVETUNE_DEBIAN_MIRROR / PVETUNE_DEBIAN_SECURITY_MIRROR, when set, are printed as they are.
#
# Read as apt reads them: etc/apt/sources.list, then etc/apt/sources.list.d/*.list (one-line format)
# and *.sources (deb822) in name order; other file names (.disabled, .save, ...) and deb822 stanzas
# with "Enabled: no" are ignored, as are cdrom: and mirror+ URIs (nothing a debootstrap can use).
# A candidate has type deb or deb-src, a suite equal to the release codename (<codename>-security
# with --security) and the component main.  Third-party repositories can match that too (a PHP or
# database repository publishing "<codename> main"), so each candidate URI is scored: +4 when apt's
# downloaded Release file for it says "Origin: Debian", +2 when it is signed by Debian's archive
# keyring (or names no key), +1 when its path ends in /debian (/debian-security).  The highest score
# wins, the first in apt's order on a tie.  Exit 1 (with the reason on stderr) when nothing matches.
set -eu

prog=apt_mirror.sh
root=/
security=0
codename=

usage() { sed -n '2,9s/^# \{0,1\}//p' "$0" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case $1 in
    --security) security=1 ;;
    --root) [ $# -ge 2 ] || usage; root=$2; shift ;;
    --root=*) root=${1#--root=} ;;
    --codename) [ $# -ge 2 ] || usage; codename=$2; shift ;;
    --codename=*) codename=${1#--codename=} ;;
    -h | --help) usage ;;
    *) echo "$prog: unknown argument: $1" >&2; usage ;;
  esac
  shift
done

if [ "$security" = 1 ]; then override=${PVETUNE_DEBIAN_SECURITY_MIRROR:-}; var=PVETUNE_DEBIAN_SECURITY_MIRROR
else override=${PVETUNE_DEBIAN_MIRROR:-}; var=PVETUNE_DEBIAN_MIRROR; fi
if [ -n "$override" ]; then
  printf '%s\n' "$override"
  exit 0
fi

root=${root%/}
if [ -z "$codename" ] && [ -r "$root/etc/os-release" ]; then
  codename=$(sed -n 's/^VERSION_CODENAME=//p' "$root/etc/os-release" | tr -d "\"'" | head -n 1)
fi
case $codename in
  '') echo "$prog: cannot tell the release codename (no VERSION_CODENAME in $root/etc/os-release); pass --codename or set $var" >&2
      exit 1 ;;
  *[!a-z0-9.-]*) echo "$prog: odd release codename: $codename" >&2; exit 1 ;;
esac
suite=$codename
[ "$security" = 1 ] && suite=$codename-security

LC_ALL=C
export LC_ALL
set --
[ -f "$root/etc/apt/sources.list" ] && set -- "$root/etc/apt/sources.list"
for f in "$root"/etc/apt/sources.list.d/*; do
  [ -f "$f" ] || continue
  case ${f##*/} in
    *[!A-Za-z0-9_.-]*) continue ;;  # apt skips such names too
    *.list | *.sources) set -- "$@" "$f" ;;
  esac
done

best=
if [ $# -gt 0 ]; then
  best=$(awk -v want="$suite" -v lists="$root/var/lib/apt/lists" -v security="$security" '
    function reset() { types = ""; uris = ""; suites = ""; comps = ""; signed = ""; enabled = "yes"; field = "" }
    function has(list, word,   n, i, a) {
      n = split(list, a, /[ \t]+/)
      for (i = 1; i <= n; i++) if (a[i] == word) return 1
      return 0
    }
    function origin_debian(uri,   base, dists, f, line, found) {
      base = uri; sub(/^[a-z0-9+.-]+:\/\//, "", base); sub(/^[^@\/]*@/, "", base); gsub(/\//, "_", base)
      dists = lists "/" base "_dists_" want "_"
      found = 0
      for (f = 1; f <= 2; f++) {
        file = dists (f == 1 ? "InRelease" : "Release")
        while ((getline line < file) > 0) if (line ~ /^Origin: Debian$/) found = 1
        close(file)
        if (found) return 1
      }
      return 0
    }
    function consider(   n, i, a, uri, score) {
      if (tolower(enabled) == "no") return
      if (!has(types, "deb") && !has(types, "deb-src")) return
      if (!has(suites, want) || !has(comps, "main")) return
      n = split(uris, a, /[ \t]+/)
      for (i = 1; i <= n; i++) {
        uri = a[i]; sub(/\/+$/, "", uri)
        if (uri == "" || uri ~ /^(cdrom|mirror)/ || uri !~ /^[a-z][a-z0-9+.-]*:/) continue
        score = 0
        if (origin_debian(uri)) score += 4
        if (signed == "" || signed ~ /debian-archive-keyring/) score += 2
        if (uri ~ (security ? "/debian-security$" : "/debian$")) score += 1
        if (best == "" || score > bestscore) { best = uri; bestscore = score }
      }
    }
    function oneline(line,   opts, rest, n, a, i, kv) {
      sub(/#.*/, "", line)
      if (line ~ /^[ \t]*$/ || line ~ /cdrom:/) return  # a cdrom: URI holds spaces; no mirror anyway
      reset()
      rest = line; sub(/^[ \t]+/, "", rest)
      types = rest; sub(/[ \t].*/, "", types); sub(/^[^ \t]+[ \t]*/, "", rest)
      if (substr(rest, 1, 1) == "[") {
        if (index(rest, "]") == 0) return
        opts = substr(rest, 2, index(rest, "]") - 2); rest = substr(rest, index(rest, "]") + 1)
        n = split(opts, a, /[ \t]+/)
        for (i = 1; i <= n; i++) if (a[i] ~ /^signed-by=/) { kv = a[i]; sub(/^signed-by=/, "", kv); signed = kv }
      }
      sub(/^[ \t]+/, "", rest)
      n = split(rest, a, /[ \t]+/)
      if (n < 3) return
      uris = a[1]; suites = a[2]; comps = ""
      for (i = 3; i <= n; i++) comps = comps " " a[i]
      consider()
    }
    function setfield(name, value) {
      if (name == "types") types = value
      else if (name == "uris") uris = value
      else if (name == "suites") suites = value
      else if (name == "components") comps = value
      else if (name == "signed-by") signed = value
      else if (name == "enabled") enabled = value
    }
    FNR == 1 { if (deb822) consider(); reset(); deb822 = (FILENAME ~ /\.sources$/) }
    !deb822 { oneline($0); next }
    /^#/ { next }
    /^[ \t]*$/ { consider(); reset(); next }
    /^[ \t]/ {  # continuation of the last field
      if (field != "") { v = $0; sub(/^[ \t]+/, "", v); if (v == ".") v = ""; cur[field] = cur[field] " " v; setfield(field, cur[field]) }
      next
    }
    {
      field = tolower($0); sub(/:.*/, "", field)
      v = $0; sub(/^[^:]*:[ \t]*/, "", v); sub(/[ \t]+$/, "", v)
      cur[field] = v; setfield(field, v)
    }
    END { if (deb822) consider(); if (best != "") print best }
  ' "$@")
fi

if [ -z "$best" ]; then
  echo "$prog: no enabled Debian source for suite $suite with component main in $root/etc/apt/sources.list or $root/etc/apt/sources.list.d/*.{list,sources}; set $var" >&2
  exit 1
fi
printf '%s\n' "$best"
