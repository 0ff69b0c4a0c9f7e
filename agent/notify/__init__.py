"""Notifiers: how alerts reach people."""

from agent.notify.base import Notifier
from agent.notify.recording import RecordingNotifier

__all__ = ["Notifier", "RecordingNotifier"]
