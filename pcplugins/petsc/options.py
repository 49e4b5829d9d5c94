"""Each PC's options table: read from the options database under the PC's prefix, checked
against its choices and ranges, printed for -help with current values."""
import math

from petsc4py import PETSc

from .errors import error


class Option:
    """One entry of a PC's options table: ``kind`` int, real, bool or str; ``choices`` for
    strings; ``lo``/``hi`` the valid range of a number (inclusive, ``open`` names the ends that
    are excluded: "lo", "hi" or "lohi"). Reals must be finite."""

    def __init__(self, name, kind, default, help, choices=None, lo=None, hi=None, open=""):
        self.name, self.kind, self.default, self.help, self.choices = name, kind, default, help, choices
        self.lo, self.hi, self.open = lo, hi, open

    @property
    def key(self):
        """The name inside the PC: the option's name without its first two words (pc_gmg_)."""
        return self.name.split("_", 2)[-1]

    def range_text(self):
        if self.lo is None and self.hi is None:
            return ""
        lo = "-inf" if self.lo is None else f"{self.lo:g}"
        hi = "inf" if self.hi is None else f"{self.hi:g}"
        return ("(" if "lo" in self.open or self.lo is None else "[") + f"{lo}, {hi}" + \
            (")" if "hi" in self.open or self.hi is None else "]")

    def in_range(self, v):
        if self.kind == "real" and not math.isfinite(v):
            return False
        lo_ok = self.lo is None or (v > self.lo if "lo" in self.open else v >= self.lo)
        hi_ok = self.hi is None or (v < self.hi if "hi" in self.open else v <= self.hi)
        return lo_ok and hi_ok


def read_options(pc, table, title):
    """Read ``table`` (a list of Option) from the options database under the PC's prefix;
    print them for -help (current values and valid ranges); reject unknown values and values out
    of range with a message naming the option, the value and what is accepted. The options
    database is the same on every rank, so every rank stops together."""
    prefix = pc.getOptionsPrefix() or ""
    opts = PETSc.Options(prefix)
    values = {}
    for o in table:
        if not opts.hasName(o.name):
            values[o.key] = o.default
            continue
        try:
            v = {"int": opts.getInt, "real": opts.getReal, "bool": opts.getBool,
                 "str": opts.getString}[o.kind](o.name)
        except (PETSc.Error, KeyError, ValueError, TypeError):
            raise error(f"{title}: option -{prefix}{o.name}: cannot read the value as {o.kind}") from None
        if o.choices and v is not None:
            v = str(v).lower()
            if v not in o.choices:
                raise error(f"{title}: option -{prefix}{o.name}: unknown value '{v}'; "
                            f"expected one of {', '.join(o.choices)}")
        if o.kind in ("int", "real") and not o.in_range(v):
            rng = o.range_text()
            raise error(f"{title}: option -{prefix}{o.name}: {v:g} is out of range; the value must be "
                        + ("a finite number" if not rng else
                           f"{'finite and ' if o.kind == 'real' else ''}in {rng}"))
        values[o.key] = v
    if values.get("pre") == 0 and values.get("post") == 0:
        names = [o.name for o in table if o.key in ("pre", "post")]
        raise error(f"{title}: options -{prefix}{names[0]} and -{prefix}{names[1]} are both 0: a cycle "
                    "without smoothing is no multigrid; give at least one sweep")
    if PETSc.Options().hasName("help"):
        lines = [f"{title} options -------------------------------------------------"]
        for o in table:
            cur = values[o.key]
            cur = "" if cur is None else (int(cur) if o.kind == "bool" else cur)
            ch = f" (choose one of) {' '.join(o.choices)}" if o.choices else ""
            rng = f" (range {o.range_text()})" if o.range_text() else ""
            lines.append(f"  -{prefix}{o.name} <{cur}>: {o.help}{ch}{rng}")
        PETSc.Sys.Print("\n".join(lines), comm=pc.getComm())
    return values



def reference():
    """docs/options.md: every PC's options table as Markdown (``python -m pcplugins.petsc.options >
    docs/options.md``; tests/petsc/test_docs.py checks that the file is current)."""
    import importlib
    out = ["# Options", "",
           "Generated from the PCs' option tables (`python -m pcplugins.petsc.options > docs/options.md`).",
           "Every PC reads them under its prefix (`-<prefix>pc_gmg_levels`); `-help` prints them with their",
           "current values. A value outside its range stops setup with an error naming the option.", ""]
    for module, cls in (("gmg", "GMG"), ("fftpoisson", "FFTPoisson"), ("amg", "AMG"),
                        ("shiftedlaplace", "ShiftedLaplace"), ("idrs", "IDRS")):
        mod = importlib.import_module(f"pcplugins.pcs.{module}")
        out += [f"## pcplugins.{cls}", "", "| option | type | default | values | description |",
                "|---|---|---|---|---|"]
        for o in mod.OPTIONS:
            values = " ".join(o.choices) if o.choices else o.range_text()
            default = "" if o.default is None else (int(o.default) if o.kind == "bool" else o.default)
            out.append(f"| `-{o.name}` | {o.kind} | {default} | {values} | {o.help.replace('|', '/')} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(reference(), end="")
