"""What a hand-built serializer's ``save()`` runs depends on the instance it was built with
(rest_framework/serializers.py: ``BaseSerializer.__init__(self, instance=None, data=empty,
...)``; ``BaseSerializer.save`` calls ``self.update(self.instance, ...)`` when
``self.instance is not None``, else ``self.create(...)``). Built with a parameter of its
function as the instance, the save runs ``create`` along a chain that leaves the parameter
at its ``None`` default (or passes ``None``) and ``update`` along one that passes an object."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

SERIALIZERS = '''
from rest_framework import serializers
from shop.models import Floor, Place, Spot


class PlaceSerializer(serializers.ModelSerializer):
    class Meta:
        model = Place
        fields = "__all__"

    def create(self, validated_data):
        return Place.objects.create(**validated_data)

    def update(self, instance, validated_data):
        for floor in instance.floor_set.all():
            floor.delete()
        instance.name = validated_data["name"]
        instance.save()
        return instance


class SpotSerializer(serializers.ModelSerializer):
    class Meta:
        model = Spot
        fields = "__all__"

    def place_object(self, validated_data, place_instance=None):
        place_serializer = PlaceSerializer(data=validated_data.pop("place"), instance=place_instance)
        place_serializer.is_valid(raise_exception=True)
        return place_serializer.save()

    def create(self, validated_data):
        validated_data["place"] = self.place_object(validated_data)
        return Spot.objects.create(**validated_data)

    def update(self, instance, validated_data):
        validated_data["place"] = self.place_object(validated_data, instance.place)
        instance.place = validated_data["place"]
        instance.save()
        return instance
'''

MODELS = '''
from django.db import models


class Place(models.Model):
    name = models.CharField(max_length=10)


class Floor(models.Model):
    place = models.ForeignKey(Place, on_delete=models.CASCADE)


class Spot(models.Model):
    place = models.ForeignKey(Place, on_delete=models.CASCADE)
'''

VIEWS = '''
from rest_framework import generics
from shop.serializers import SpotSerializer


class SpotListCreateView(generics.ListCreateAPIView):
    serializer_class = SpotSerializer


class SpotDetailView(generics.RetrieveUpdateAPIView):
    serializer_class = SpotSerializer
'''


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _findings(rule: Rule, serializers: str = SERIALIZERS) -> dict[str, tuple[list[str], set[str]]]:
    """Per finding's function: its chain's functions and the functions its sequence writes in."""
    files = {"shop/serializers.py": serializers, "shop/models.py": MODELS, "shop/views.py": VIEWS}
    return {
        function: ([step.function for step in finding.chain], {site.function for site in finding.sequence})
        for (_, function), finding in reported(analyze_source(files, rule)).items()
    }


def test_a_save_with_the_instance_parameter_left_at_none_runs_create_only(rule: Rule):
    # SpotSerializer.create calls place_object without place_instance: the save creates a
    # Place, it never runs PlaceSerializer.update's deletes.
    found = _findings(rule)
    create_chains = [chain for chain, _ in found.values() if any(step.startswith("SpotListCreateView.") for step in chain)]
    assert create_chains and all("PlaceSerializer.update" not in chain for chain in create_chains)
    assert all("PlaceSerializer.update" not in writes for function, (chain, writes) in found.items() if "SpotListCreateView.create" in chain)


def test_a_save_passed_an_instance_still_runs_update(rule: Rule):
    # SpotSerializer.update passes instance.place: the save may run PlaceSerializer.update,
    # and the update entry's finding sequences its deletes.
    found = _findings(rule)
    chain, writes = found["PlaceSerializer.update"]
    assert "SpotSerializer.update" in chain and "SpotSerializer.create" not in chain
    assert any("PlaceSerializer.update" in writes for function, (chain, writes) in found.items() if "SpotDetailView.update" in chain)


def test_a_save_passed_none_explicitly_runs_create_only(rule: Rule):
    serializers = SERIALIZERS.replace("self.place_object(validated_data, instance.place)", "self.place_object(validated_data, None)")
    found = _findings(rule, serializers)
    assert "PlaceSerializer.update" not in found
    assert all("PlaceSerializer.update" not in writes for _, writes in found.values())


def test_a_save_built_without_an_instance_never_runs_update(rule: Rule):
    # (PlaceSerializer.update, which no path then reaches, stays an entry point of its own.)
    serializers = SERIALIZERS.replace("data=validated_data.pop(\"place\"), instance=place_instance", "data=validated_data.pop(\"place\")")
    found = _findings(rule, serializers)
    spots = {function: item for function, item in found.items() if not function.startswith("PlaceSerializer.")}
    assert spots and all("PlaceSerializer.update" not in chain and "PlaceSerializer.update" not in writes for chain, writes in spots.values())


def test_an_update_through_drf_keeps_the_saves_own_write(rule: Rule):
    # PlaceSerializer.update ends in super().update(...): DRF's ModelSerializer.update saves
    # the instance, which place_serializer.save() stands for on the path that updates; the
    # create edge (which would stand for the call itself) cannot run there.
    serializers = SERIALIZERS.replace(
        "        instance.name = validated_data[\"name\"]\n        instance.save()\n        return instance\n",
        "        return super().update(instance, validated_data)\n",
    )
    _, writes = _findings(rule, serializers)["SpotSerializer.update"]
    assert {"SpotSerializer.place_object", "PlaceSerializer.update"} <= writes
    assert "PlaceSerializer.create" not in writes
