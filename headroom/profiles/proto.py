"""The pprof ``profile.proto`` schema, described to the protobuf library at import.

The message layout below is google/pprof's ``proto/profile.proto`` (package
``perftools.profiles``, proto3), field for field: names, numbers, types and
``repeated``.  It is built as a ``FileDescriptorProto`` and handed to the
protobuf runtime, which does all the decoding; there is no wire decoder
here and no generated module to keep in step with a ``protoc`` version.

``Profile`` is the message class; ``Profile.FromString(data)`` parses the
(un-gzipped) bytes of a profile.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "perftools.profiles"

_F = descriptor_pb2.FieldDescriptorProto
_INT64, _UINT64, _STRING, _BOOL, _MESSAGE = (
    _F.TYPE_INT64,
    _F.TYPE_UINT64,
    _F.TYPE_STRING,
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


def file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """profile.proto as a FileDescriptorProto."""
    fd = descriptor_pb2.FileDescriptorProto(
        name="headroom/profiles/profile.proto", package=PACKAGE, syntax="proto3"
    )
    for name, fields in MESSAGES.items():
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
        for name in MESSAGES
    }


CLASSES = _classes()
Profile = CLASSES["Profile"]
