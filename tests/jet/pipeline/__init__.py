"""Jet 0.7's own Pipeline API tests (`com.hazelcast.jet.pipeline`), ported."""
