"""Parameters that change the input while they are read: an integer whose
``__index__``, and a sequence whose ``__len__`` or ``__iter__``, first calls ``act``
(which reshapes or resizes the input).  Plain Python, so that a fresh interpreter
(:func:`interpreter.run_python`) imports it too."""

import collections.abc


class Index:
    """An integer whose ``__index__`` first changes the input."""

    def __init__(self, value, act):
        self.value, self.act = value, act

    def __index__(self):
        self.act()
        return self.value


class Seq(collections.abc.Sequence):
    """A sequence of integers whose ``__len__`` or ``__iter__`` first changes the input."""

    def __init__(self, values, act, on):
        self.values, self.act, self.on = values, act, on

    def __len__(self):
        if self.on == "len":
            self.act()
        return len(self.values)

    def __getitem__(self, i):
        return self.values[i]

    def __iter__(self):
        if self.on == "iter":
            self.act()
        return iter(self.values)
