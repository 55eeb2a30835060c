"""What a fuzz run seeds (tests/fuzz/conftest.py's `FuzzWorld`): an account with an API key, a second
one whose session token the session-only routes use, models on the reference upstream, and one
routine, conversation, collection with a document, inbox message and channel, each made again when
a fuzzed DELETE took it."""

from __future__ import annotations

import secrets

from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    CollectionFactory,
    ConversationFactory,
    DocumentFactory,
    InboxMessageFactory,
    LinkedChannelFactory,
    MessageFactory,
    ModelFactory,
    ModelServerFactory,
    RoutineFactory,
)


class FuzzSeed:
    """The seeded data of `FuzzWorld`; `upstream` (the reference upstream's controller) is set first."""

    def _seed(self) -> None:
        from accounts.keys import api_key_generate
        from accounts.sessions import session_create

        self.group = AccountGroupFactory(name="fuzz", api_access=True)
        self.account = AccountFactory(group=self.group, email="fuzz@example.test")
        self.key = api_key_generate(account=self.account).key
        # the session-only routes (logout, key generation and revocation) work on this one
        self.holder = AccountFactory(group=self.group, email="fuzz-session@example.test")
        self.session = session_create(account=self.holder, remember=False).token
        oa = ModelServerFactory(name="oa", kind="openai", base_url=f"{self.upstream.url}/v1", read_timeout=5.0)
        an = ModelServerFactory(name="an", kind="anthropic", base_url=self.upstream.url, read_timeout=5.0)
        ModelFactory(server=oa, name="echo-1", is_default=True)
        ModelFactory(server=oa, name="embed-1", supports_chat=False, supports_embeddings=True)
        ModelFactory(server=oa, name="whisper-1", supports_chat=False, supports_audio=True)
        ModelFactory(server=an, name="claude-echo")
        self._objects: dict[str, int] = {}
        self._mcp: dict[str, str] | None = None

    def _routine(self):
        from routines.models import Routine

        routine = Routine.objects.filter(pk=self._objects.get("routine"), account=self.account).first()
        if routine is None:
            routine = RoutineFactory(account=self.account, name="fuzzed", prompt="Say hello", trigger="webhook",
                                     delivery_targets=["inapp"], webhook_token=secrets.token_hex(24))
            self._objects["routine"] = routine.pk
        return routine

    def _hook_token(self) -> str:
        """The routine's webhook token as it is now (rotate-token changes it), unsigned again
        (rotate-secret signs it) so that a fuzzed event gets past the signature check."""
        from routines.models import Routine

        routine = self._routine()
        Routine.objects.filter(pk=routine.pk).update(webhook_secret=None)
        return Routine.objects.values_list("webhook_token", flat=True).get(pk=routine.pk)

    def _conversation(self) -> int:
        from native.models import Conversation

        if not Conversation.objects.filter(pk=self._objects.get("conversation"), trashed_at=None).exists():
            conversation = ConversationFactory(account=self.account, title="fuzzed")
            MessageFactory(conversation=conversation, role="user", content="hello")
            self._objects["conversation"] = conversation.pk
        return self._objects["conversation"]

    def _collection(self) -> int:
        from native.models import Collection

        if not Collection.objects.filter(pk=self._objects.get("collection")).exists():
            self._objects["collection"] = CollectionFactory(account=self.account, name="fuzzed").pk
        return self._objects["collection"]

    def _document(self) -> int:
        from native.models import Collection, Document

        collection = self._collection()
        if not Document.objects.filter(pk=self._objects.get("document"), collection_id=collection).exists():
            self._objects["document"] = DocumentFactory(
                collection=Collection.objects.get(pk=collection), name="notes.txt", content_type="text/plain",
                size=5, text="hello").pk
        return self._objects["document"]

    def _inbox_message(self) -> int:
        from routines.models import InboxMessage

        if not InboxMessage.objects.filter(pk=self._objects.get("message")).exists():
            self._objects["message"] = InboxMessageFactory(account=self.account, title="fuzzed", body="hello").pk
        return self._objects["message"]

    def _channel(self) -> int:
        from django.utils import timezone

        from routines.models import LinkedChannel

        if not LinkedChannel.objects.filter(pk=self._objects.get("channel")).exists():
            self._objects["channel"] = LinkedChannelFactory(
                account=self.account, kind="telegram", address=str(secrets.randbelow(10 ** 9)),
                verified_at=timezone.now()).pk
        return self._objects["channel"]
