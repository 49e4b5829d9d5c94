"""Errors a user can act on, raised as PETSc errors: one line that names the PC, the option or
object, and what to do."""
import functools

from petsc4py import PETSc


class PCPluginError(RuntimeError):
    """A user-facing error; petsc4py turns an exception in a Python PC into a PETSc error."""


PCPluginError.__module__ = "pcplugins"      # as PETSc prints it: pcplugins.PCPluginError: message


def error(msg):
    return PCPluginError(msg)


def user_errors(method):
    """For the PCs' entry points (setFromOptions, setUp, apply, ...): a PCPluginError, which is
    about the user's input, reaches PETSc without the Python frames it passed through, so PETSc's
    error shows the message and one frame, not a traceback of our internals. With the option
    -pcplugins_traceback the whole traceback stays, for debugging. Other exceptions (our bugs) keep
    theirs."""
    @functools.wraps(method)
    def entry(self, *args):
        try:
            return method(self, *args)
        except PCPluginError as e:
            if PETSc.Options().getBool("pcplugins_traceback", False):
                raise
            raise e.with_traceback(None) from None
    return entry

