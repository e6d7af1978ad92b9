"""A tree's nvidia-smi -q capture (<root>/.pvetune/nvidia-smi-q.txt) read and changed as the driver would report it:
the tests' way to say "after a reboot, the power limit was back at the cap"."""
import os
import re

CAPTURE = ".pvetune/nvidia-smi-q.txt"


def power_limits(root):
    """{bus id (lower case): the Current Power Limit in watts} of every GPU in the capture."""
    with open(os.path.join(str(root), CAPTURE)) as handle:
        text = handle.read()
    return {bus.lower(): float(watts) for bus, watts in re.findall(
        r"^GPU ([0-9A-Fa-f:.]+)\n(?:.*\n)*?\s+Current Power Limit\s+: ([0-9.]+) W", text, re.M)}


def set_power_limit(root, bus, watts):
    """The GPU ``bus`` (00000000:41:00.0) reports ``watts`` as its current and requested limit."""
    path = os.path.join(str(root), CAPTURE)
    with open(path) as handle:
        text = handle.read()
    start = text.index("GPU " + bus.upper())
    end = text.find("\nGPU ", start + 1)
    end = len(text) if end < 0 else end
    block = re.sub(r"((?:Current|Requested) Power Limit\s*: )[0-9.]+ W", r"\g<1>%.2f W" % watts, text[start:end])
    with open(path, "w") as handle:
        handle.write(text[:start] + block + text[end:])
