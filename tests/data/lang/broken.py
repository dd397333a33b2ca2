def good(x):
    return x + 1


def broken(:
    return (


class Survivor:
    def method(self):
        return good(2)
