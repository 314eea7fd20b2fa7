"""Broker provisioners: fetch a release, start it on loopback, control it (pause/resume/kill), stop it."""
