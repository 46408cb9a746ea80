"""Where an array's bytes live: the mapped file and the offset in it, read from /proc/self/maps.
Two processes that name the same file and offset see the same bytes: no copy was made."""


def where(array):
    address = array.data_ptr() if hasattr(array, "data_ptr") else array.ctypes.data
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split()
            low, high = (int(x, 16) for x in parts[0].split("-"))
            if low <= address < high:
                name = parts[5] if len(parts) > 5 else "anonymous"
                return "%s@%d" % (name, address - low + int(parts[2], 16))
    return "unmapped@%d" % address
