# scripts/bench/lib/sshd.sh - a private OpenSSH sshd on 127.0.0.1 for the benches (sourced).
#
# sshd_start DIR [WHO] starts /usr/sbin/sshd as a child of the calling shell, set up as
# spec/fixtures/sshd.lua does: its own sshd_config in DIR, ed25519 host and user keys
# (DIR/host_key, DIR/user_key), DIR/authorized_keys, public-key login only, no PAM,
# internal-sftp (so neither beck nor scp runs the user's login shell and its rc files), on a
# free random port. It sets SSHD_PID, SSHD_PORT, SSHD_USER (the user running the shell) and
# writes DIR/known_hosts for [127.0.0.1]:PORT. On failure it prints "WHO: sshd did not start:"
# and sshd's log to stderr and returns 1. The caller stops it: kill "$SSHD_PID", or
# sshd_stop, which also waits.

SSHD_PID=
SSHD_PORT=
SSHD_USER=

sshd_start() {
    local dir=$1 who=${2:-bench} attempt
    [ "$(id -u)" = 0 ] && mkdir -p /run/sshd   # sshd as root needs its privilege-separation dir
    ssh-keygen -q -N '' -t ed25519 -f "$dir/host_key" < /dev/null
    ssh-keygen -q -N '' -t ed25519 -f "$dir/user_key" < /dev/null
    cp "$dir/user_key.pub" "$dir/authorized_keys"
    SSHD_USER=$(id -un)
    for attempt in 1 2 3 4 5; do
        SSHD_PORT=$(( 20000 + RANDOM % 40000 ))
        cat > "$dir/sshd_config" <<CONF
ListenAddress 127.0.0.1
Port $SSHD_PORT
HostKey $dir/host_key
AuthorizedKeysFile $dir/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile $dir/sshd.pid
LogLevel VERBOSE
MaxStartups 100
MaxSessions 100
Subsystem sftp internal-sftp
CONF
        /usr/sbin/sshd -D -e -f "$dir/sshd_config" 2> "$dir/sshd.log" &
        SSHD_PID=$!
        for _ in $(seq 1 100); do
            if (exec 3<> "/dev/tcp/127.0.0.1/$SSHD_PORT") 2> /dev/null; then
                echo "[127.0.0.1]:$SSHD_PORT $(cut -d' ' -f1,2 "$dir/host_key.pub")" \
                    > "$dir/known_hosts"
                return 0
            fi
            kill -0 "$SSHD_PID" 2> /dev/null || break
            sleep 0.05
        done
        sshd_stop
    done
    echo "$who: sshd did not start:" >&2
    cat "$dir/sshd.log" >&2
    return 1
}

# sshd_stop: stops the sshd sshd_start started, if any.
sshd_stop() {
    if [ -n "$SSHD_PID" ]; then
        kill "$SSHD_PID" 2> /dev/null || true
        wait "$SSHD_PID" 2> /dev/null || true
        SSHD_PID=
    fi
}
