// flamebpf against real podman containers (runc, cgroupfs driver).
