"""CANN's protobuf schemas (written from the field tables) and their generated Python modules.

``dump_data.proto`` is the newest ``toolkit.dumpdata.DumpData`` (a superset of every older variant);
``ge_ir.proto`` is GE's ``ge.proto.ModelDef`` used by ``ge_proto_*.txt`` graph dumps. Regenerate the
``*_pb2.py`` modules with ``python scripts/gen_proto.py``; ``tests/test_proto.py`` fails when they drift.
"""
