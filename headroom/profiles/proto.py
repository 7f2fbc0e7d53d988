"""The pprof ``profile.proto`` schema, described to the protobuf library at import.

The message layout below is google/pprof's ``proto/profile.proto`` (package
``perftools.profiles``, proto3), field for field: names, numbers, types and
``repeated``.  It is built as a ``FileDescriptorProto`` and handed to the
protobuf runtime, which does all the decoding; there is no wire decoder
here and no generated module to keep in step with a ``protoc`` version.

``Profile`` is the message class; ``Profile.FromString(data)`` parses the
(un-gzipped) bytes of a profile.

Column views.  Walking ``Profile``'s Python message objects costs far more
than the library's parse (about 1 us per sample or location against tens of
nanoseconds in C), so :func:`columns` reads the same bytes through other
descriptions of the same wire fields, and every number still comes out of
the library's decoder:

* ``ProfileView``: ``Profile`` with ``sample`` and ``location`` declared
  ``bytes`` (each element's serialized bytes, not a message object) and
  ``function`` declared as one ``FunctionColumns`` message;
* ``SampleColumns``, ``LocationColumns`` (with ``LineColumns``) and
  ``FunctionColumns``: the same fields, all ``repeated``.  A message field
  that is not repeated but occurs many times is merged (protobuf's rule),
  and merging appends repeated fields: the 300 functions of a profile parse
  into one ``FunctionColumns`` holding a list of 300 ids, one of 300 names...
  The same holds for parsing the concatenation of serialized messages: the
  samples joined into one byte string give one list of all their location
  ids, the locations one list of ids, one of addresses, and (their lines
  merged into one ``LineColumns``) one list of the function ids of all lines.

Which location ids belong to which sample, and which lines to which
location, is kept by a terminator joined in after every sample (location
id 0) and every location (a line of function id 0): ids start at 1 in
profile.proto.  :func:`split` cuts a column at its terminators; a column
whose terminators do not count its records, or a singular field that some
record leaves out, raises :class:`Unfit`, and the reader walks ``Profile``
instead (same result, or the error that says what is wrong).  A line that
gives no function id (0) adds nothing to the lines' column: it is no frame,
in the walk too (pprof reads it as a line of no function).  One assumption
beyond profile.proto's own: a record writes each singular field at most
once, as every pprof writer does (the library's parse would keep the last).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "perftools.profiles"

_F = descriptor_pb2.FieldDescriptorProto
_INT64, _UINT64, _STRING, _BYTES, _BOOL, _MESSAGE = (
    _F.TYPE_INT64,
    _F.TYPE_UINT64,
    _F.TYPE_STRING,
    _F.TYPE_BYTES,
    _F.TYPE_BOOL,
    _F.TYPE_MESSAGE,
)
_REPEATED = "repeated"

# message -> [(field name, number, type, "repeated" or "", message type name)]
MESSAGES: dict[str, list[tuple]] = {
    "Profile": [
        ("sample_type", 1, _MESSAGE, _REPEATED, "ValueType"),
        ("sample", 2, _MESSAGE, _REPEATED, "Sample"),
        ("mapping", 3, _MESSAGE, _REPEATED, "Mapping"),
        ("location", 4, _MESSAGE, _REPEATED, "Location"),
        ("function", 5, _MESSAGE, _REPEATED, "Function"),
        ("string_table", 6, _STRING, _REPEATED, ""),
        ("drop_frames", 7, _INT64, "", ""),
        ("keep_frames", 8, _INT64, "", ""),
        ("time_nanos", 9, _INT64, "", ""),
        ("duration_nanos", 10, _INT64, "", ""),
        ("period_type", 11, _MESSAGE, "", "ValueType"),
        ("period", 12, _INT64, "", ""),
        ("comment", 13, _INT64, _REPEATED, ""),
        ("default_sample_type", 14, _INT64, "", ""),
        ("tick_unit", 15, _INT64, "", ""),
        ("label_set", 16, _MESSAGE, _REPEATED, "LabelSet"),
    ],
    "ValueType": [("type", 1, _INT64, "", ""), ("unit", 2, _INT64, "", "")],
    "Sample": [
        ("location_id", 1, _UINT64, _REPEATED, ""),
        ("value", 2, _INT64, _REPEATED, ""),
        ("label", 3, _MESSAGE, _REPEATED, "Label"),
        ("breakdown", 4, _MESSAGE, _REPEATED, "Breakdown"),
    ],
    "Breakdown": [
        ("ticks", 1, _INT64, _REPEATED, ""),
        ("value", 2, _INT64, _REPEATED, ""),
        ("label_set_id", 3, _UINT64, _REPEATED, ""),
    ],
    "Label": [
        ("key", 1, _INT64, "", ""),
        ("str", 2, _INT64, "", ""),
        ("num", 3, _INT64, "", ""),
        ("num_unit", 4, _INT64, "", ""),
    ],
    "LabelSet": [("id", 1, _UINT64, "", ""), ("label", 2, _MESSAGE, _REPEATED, "Label")],
    "Mapping": [
        ("id", 1, _UINT64, "", ""),
        ("memory_start", 2, _UINT64, "", ""),
        ("memory_limit", 3, _UINT64, "", ""),
        ("file_offset", 4, _UINT64, "", ""),
        ("filename", 5, _INT64, "", ""),
        ("build_id", 6, _INT64, "", ""),
        ("has_functions", 7, _BOOL, "", ""),
        ("has_filenames", 8, _BOOL, "", ""),
        ("has_line_numbers", 9, _BOOL, "", ""),
        ("has_inline_frames", 10, _BOOL, "", ""),
    ],
    "Location": [
        ("id", 1, _UINT64, "", ""),
        ("mapping_id", 2, _UINT64, "", ""),
        ("address", 3, _UINT64, "", ""),
        ("line", 4, _MESSAGE, _REPEATED, "Line"),
        ("is_folded", 5, _BOOL, "", ""),
    ],
    "Line": [("function_id", 1, _UINT64, "", ""), ("line", 2, _INT64, "", "")],
    "Function": [
        ("id", 1, _UINT64, "", ""),
        ("name", 2, _INT64, "", ""),
        ("system_name", 3, _INT64, "", ""),
        ("filename", 4, _INT64, "", ""),
        ("start_line", 5, _INT64, "", ""),
    ],
}


#: column views of the same wire fields (see the module's docstring).  Every field of the
#: original is declared, so that nothing takes the parser's slower unknown-field path.
VIEWS: dict[str, list[tuple]] = {
    "ProfileView": [
        (f[0], f[1], _BYTES, _REPEATED, "")
        if f[0] in ("sample", "location", "mapping")
        else ((f[0], f[1], _MESSAGE, "", "FunctionColumns") if f[0] == "function" else f)
        for f in MESSAGES["Profile"]
    ],
    "SampleColumns": [
        ("location_id", 1, _UINT64, _REPEATED, ""),
        ("value", 2, _INT64, _REPEATED, ""),
        ("label", 3, _BYTES, _REPEATED, ""),
        ("breakdown", 4, _BYTES, _REPEATED, ""),
    ],
    "LocationColumns": [
        ("id", 1, _UINT64, _REPEATED, ""),
        ("mapping_id", 2, _UINT64, _REPEATED, ""),
        ("address", 3, _UINT64, _REPEATED, ""),
        ("line", 4, _MESSAGE, "", "LineColumns"),  # singular: the lines of all locations merge
        ("is_folded", 5, _BOOL, _REPEATED, ""),
    ],
    "LineColumns": [("function_id", 1, _UINT64, _REPEATED, ""), ("line", 2, _INT64, _REPEATED, "")],
    "FunctionColumns": [(f[0], f[1], f[2], _REPEATED, "") for f in MESSAGES["Function"]],
}


def file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """profile.proto, and its column views, as a FileDescriptorProto."""
    fd = descriptor_pb2.FileDescriptorProto(
        name="headroom/profiles/profile.proto", package=PACKAGE, syntax="proto3"
    )
    for name, fields in {**MESSAGES, **VIEWS}.items():
        msg = fd.message_type.add(name=name)
        for fname, number, ftype, rep, type_name in fields:
            f = msg.field.add(name=fname, number=number, type=ftype)
            f.label = _F.LABEL_REPEATED if rep else _F.LABEL_OPTIONAL
            if type_name:
                f.type_name = f".{PACKAGE}.{type_name}"
    return fd


def _classes() -> dict[str, type]:
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_descriptor())
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))
        for name in {**MESSAGES, **VIEWS}
    }


CLASSES = _classes()
Profile = CLASSES["Profile"]
ProfileView = CLASSES["ProfileView"]

# --------------------------------------------------------------------------
# columns: every sample, location and function of a profile as numpy arrays

#: after every sample: location id 0 (no location has it); after every location: a line of
#: function id 0 (no function has it).  Serialized by the library, like everything else.
_END_SAMPLE = CLASSES["SampleColumns"](location_id=[0]).SerializeToString()
_END_LOCATION = CLASSES["LocationColumns"](line=CLASSES["LineColumns"](function_id=[0])).SerializeToString()


class Unfit(Exception):
    """The columns do not split into one record per element: walk the messages instead."""


def one_each(column, n: int) -> np.ndarray:
    """A singular field's column: one value per record, or :class:`Unfit` (one left it out)."""
    col = np.array(column, np.uint64)
    if len(col) != n:
        raise Unfit(f"{len(col)} values for {n} records")
    return col


@dataclass(frozen=True)
class Columns:
    """A profile's samples, locations and functions as arrays (uint64, as on the wire).

    ``sample_locations`` holds the location ids of sample 0, a 0, those of sample 1,
    a 0 ...; ``line_function`` the function ids of location 0's lines (innermost
    first), a 0, location 1's, a 0 ...: one 0 per record, :func:`ends` finds them.
    ``sample_values`` holds every sample's values one after the other (int64)."""

    header: object  # the ProfileView message: sample_type, string_table, period, times
    sample_locations: np.ndarray
    sample_values: np.ndarray
    location_id: np.ndarray
    line_function: np.ndarray
    function_id: np.ndarray
    function_name: np.ndarray  # string table indices (int64)


def ends(column: np.ndarray, n: int) -> np.ndarray:
    """Positions of the n terminators (0) of a column, or :class:`Unfit`."""
    at = np.flatnonzero(column == 0)
    if len(at) != n:
        raise Unfit(f"{len(at)} terminators for {n} records")
    return at


def columns(data: bytes) -> Columns:
    """The columns of an (un-gzipped) profile; DecodeError when the bytes are no profile,
    :class:`Unfit` when a singular field's column does not give one value per record."""
    head = ProfileView.FromString(data)
    ns, nl = len(head.sample), len(head.location)
    s = CLASSES["SampleColumns"].FromString(_END_SAMPLE.join(head.sample) + _END_SAMPLE if ns else b"")
    loc = CLASSES["LocationColumns"].FromString(
        _END_LOCATION.join(head.location) + _END_LOCATION if nl else b""
    )
    fn = head.function
    return Columns(
        header=head,
        sample_locations=np.array(s.location_id, np.uint64),
        sample_values=np.array(s.value, np.int64),
        location_id=one_each(loc.id, nl),
        line_function=np.array(loc.line.function_id, np.uint64),
        function_id=np.array(fn.id, np.uint64),
        function_name=one_each(fn.name, len(fn.id)).view(np.int64),
    )
