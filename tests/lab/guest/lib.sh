# Loads every lab building block. Sourced by the guest's init, by `lab shell`
# and by scenarios; all functions are prefixed by their library's name.
for _lab_lib in base network target initiator faults capture pathkeeper plan_checks daemon dbus_checks bench systemd_checks netcheck_checks adaptive_checks; do
    source "$LAB_DIR/guest/$_lab_lib.sh" || return 1
done
unset _lab_lib
