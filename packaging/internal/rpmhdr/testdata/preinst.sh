#!/bin/sh
systemd-sysusers - <<EOF
g tiny -
EOF
