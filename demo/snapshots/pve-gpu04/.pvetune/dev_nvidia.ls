crw-rw-rw- 1 root root 195,   0 Nov 20 09:12 /dev/nvidia0
crw-rw-rw- 1 root root 195,   1 Nov 20 09:12 /dev/nvidia1
crw-rw-rw- 1 root root 195,   2 Nov 20 09:12 /dev/nvidia2
crw-rw-rw- 1 root root 195,   3 Nov 20 09:12 /dev/nvidia3
crw-rw-rw- 1 root root 195,   4 Nov 20 09:12 /dev/nvidia4
crw-rw-rw- 1 root root 195,   5 Nov 20 09:12 /dev/nvidia5
crw-rw-rw- 1 root root 195,   6 Nov 20 09:12 /dev/nvidia6
crw-rw-rw- 1 root root 195,   7 Nov 20 09:12 /dev/nvidia7
crw-rw-rw- 1 root root 510,   0 Nov 20 09:12 /dev/nvidia-uvm
crw-rw-rw- 1 root root 510,   1 Nov 20 09:12 /dev/nvidia-uvm-tools
crw-rw-rw- 1 root root 195, 254 Nov 20 09:12 /dev/nvidia-modeset
crw-rw-rw- 1 root root 195, 255 Nov 20 09:12 /dev/nvidiactl

/dev/nvidia-caps:
total 0
cr-------- 1 root root 509, 1 Nov 20 09:12 nvidia-cap1
cr--r--r-- 1 root root 509, 2 Nov 20 09:12 nvidia-cap2
