import factory
from django.utils import timezone

from accounts.keys import api_key_generate
from accounts.models import Account, AccountGroup
from accounts.sessions import session_create
from gateway.models import Model, ModelServer, UsageRecord

PASSWORD = "correct horse battery staple"


class AccountGroupFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AccountGroup
        django_get_or_create = ["name"]

    name = factory.Sequence(lambda n: f"group-{n}")
    api_access = True


class AccountFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Account
        skip_postgeneration_save = True

    email = factory.Sequence(lambda n: f"person{n}@example.test")
    full_name = factory.Faker("name")
    group = factory.SubFactory(AccountGroupFactory)
    password = factory.PostGenerationMethodCall("set_password", PASSWORD)

    @factory.post_generation
    def _save(obj, create, extracted, **kwargs):
        if create:
            obj.save()


class ModelServerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ModelServer

    name = factory.Sequence(lambda n: f"server{n}")
    base_url = "http://127.0.0.1:9100/v1"


class ModelFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Model

    server = factory.SubFactory(ModelServerFactory)
    name = factory.Sequence(lambda n: f"model-{n}")


class UsageRecordFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = UsageRecord

    account = factory.SubFactory(AccountFactory)
    model = "srv/model-a"
    surface = "chat_completions"
    input_tokens = 10
    output_tokens = 5
    created_at = factory.LazyFunction(timezone.now)


def api_key_for(account: Account) -> str:
    return api_key_generate(account=account).key


def session_for(account: Account, remember: bool = False) -> str:
    return session_create(account=account, remember=remember).token


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
