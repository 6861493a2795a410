"""Stamps with UTC offsets across a DST change: each stamp converts by its own offset.

Local stamps carry two offsets around a DST change (Europe/Berlin ``+01:00`` before 29 March
2026 01:00 UTC, ``+02:00`` after). A parse into one zone refuses the mix ("Mixed timezones
detected"), so an http-feed that writes local stamps with offsets, as its docs invite, failed
every fetch whose window crossed a change, and the refetch of the missing range failed again
until the site left the plan. The same parse sat in the Electricity Maps / WattTime stamp
reader and the Open-Meteo file reader (which raised a bare ValueError).
"""

from __future__ import annotations

import json
from datetime import UTC

import pandas as pd
import pytest

from carbonsched.adapters.signals import electricitymaps_api as em
from carbonsched.adapters.signals._live import offset_stamps_utc, utc_stamps
from carbonsched.adapters.signals.http_feed import FeedSpec, read_http_feed
from carbonsched.adapters.signals.openmeteo import read_open_meteo
from carbonsched.errors import ProviderError

BERLIN = "Europe/Berlin"


def _local_hours(start_utc: str, hours: int, tz: str = BERLIN) -> list[str]:
    idx = pd.date_range(pd.Timestamp(start_utc, tz=UTC), periods=hours, freq="h")
    return [t.tz_convert(tz).isoformat() for t in idx]


def _feed(time_zone: str = BERLIN) -> FeedSpec:
    return FeedSpec("de-feed", "/x.csv", "csv", "time", time_zone, "start",
                    {"carbon_intensity_g_per_kwh": "ci"})


@pytest.mark.parametrize(("start", "offsets"), [
    # spring forward: local 01:00+01:00 then 03:00+02:00 (02:00 does not exist)
    ("2026-03-28T22:00", {"+01:00", "+02:00"}),
    # fall back: local 02:00 comes twice, +02:00 then +01:00
    ("2026-10-24T22:00", {"+01:00", "+02:00"}),
])
def test_an_http_feed_of_local_stamps_with_offsets_reads_across_a_dst_change(start, offsets):
    stamps = _local_hours(start, 30)
    assert {s[-6:] for s in stamps} == offsets           # the body really mixes two offsets
    body = "time,ci\n" + "".join(f"{s},{300 + i}\n" for i, s in enumerate(stamps))
    frame, _meta = read_http_feed(body, _feed())
    want = pd.date_range(pd.Timestamp(start, tz=UTC), periods=30, freq="h")
    assert list(frame.index) == list(want)               # 30 distinct, contiguous UTC hours
    assert list(frame["carbon_intensity_g_per_kwh"]) == [300.0 + i for i in range(30)]


def test_an_http_feed_of_utc_stamps_reads_as_before():
    # just at the limit: one offset (Z) throughout, the window across the same change
    stamps = [t.isoformat().replace("+00:00", "Z") for t in
              pd.date_range(pd.Timestamp("2026-03-28T22:00", tz=UTC), periods=6, freq="h")]
    frame, _ = read_http_feed("time,ci\n" + "".join(f"{s},1\n" for s in stamps), _feed())
    assert frame.index[0] == pd.Timestamp("2026-03-28T22:00", tz=UTC) and len(frame) == 6


def test_an_http_feed_mixing_naive_and_offset_stamps_is_refused_with_the_stamp():
    body = "time,ci\n2026-03-29T01:00:00+01:00,1\n2026-03-29T03:00:00,2\n"
    with pytest.raises(ProviderError, match=r"de-feed.*time column 'time': timestamp "
                       r"'2026-03-29T03:00:00' has no UTC offset while others have one; give "
                       r"every stamp an offset"):
        read_http_feed(body, _feed())


def test_naive_local_stamps_are_still_refused_in_the_missing_hour():
    with pytest.raises(ProviderError, match="the feed must give UTC offsets around DST"):
        read_http_feed("time,ci\n2026-03-29 02:30,1\n", _feed())


def test_provider_stamps_with_two_offsets_convert_each_by_its_own():
    stamps = _local_hours("2026-10-24T23:00", 4)       # 01:00+02, 02:00+02, 02:00+01, 03:00+01
    idx = utc_stamps(stamps, "electricitymaps", "DE carbon intensity")
    assert list(idx) == list(pd.date_range(pd.Timestamp("2026-10-24T23:00", tz=UTC),
                                           periods=4, freq="h"))
    assert offset_stamps_utc([], "p", "w").tz is not None       # no stamps: empty UTC
    assert offset_stamps_utc(["2026-01-01T00:00"], "p", "w") is None
    with pytest.raises(ProviderError, match="has no UTC offset; refusing to guess"):
        utc_stamps(["2026-01-01T00:00"], "p", "w")
    with pytest.raises(ProviderError, match="unparsable timestamp"):
        utc_stamps(["2026-13-01T00:00Z"], "p", "w")


def test_the_electricity_maps_reader_takes_local_offsets_across_a_change():
    rows = [{"datetime": s, "carbonIntensity": 100 + i, "isEstimated": False,
             "emissionFactorType": "direct"}
            for i, s in enumerate(_local_hours("2026-03-28T23:00", 3))]
    frame, _ = em.read_electricitymaps_api({"zone": "DE", "data": rows}, "DE")
    assert list(frame["carbon_intensity_g_per_kwh"]) == [100.0, 101.0, 102.0]
    assert frame.index[0] == pd.Timestamp("2026-03-28T23:00", tz=UTC)


def test_an_open_meteo_file_with_offset_labels_reads_across_a_change(tmp_path):
    labels = _local_hours("2026-03-28T22:00", 5)
    doc = {"timezone": BERLIN, "hourly": {"time": labels, "temperature_2m": [1, 2, 3, 4, 5],
                                          "relative_humidity_2m": [50] * 5},
           "hourly_units": {"temperature_2m": "°C"}}
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    frame, _ = read_open_meteo(path)
    assert frame.index[0] == pd.Timestamp("2026-03-28T22:00", tz=UTC)
    assert list(frame["temperature_c"]) == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_hour_only_offsets_as_postgresql_writes_them_are_offsets():
    """``2026-07-01 00:00:00+02`` (PostgreSQL's ``timestamptz`` text) carries an offset: it
    was read before this parser took each stamp by its own offset, and must still be."""
    body = "time,ci\n2026-07-01 00:00:00+02,1\n2026-07-01 01:00:00+02,2\n"
    frame, _ = read_http_feed(body, _feed())
    assert list(frame.index) == [pd.Timestamp("2026-06-30T22:00", tz=UTC),
                                 pd.Timestamp("2026-06-30T23:00", tz=UTC)]
    assert list(utc_stamps(["2026-07-01T00:00-05"], "p", "w")) == [
        pd.Timestamp("2026-07-01T05:00", tz=UTC)]
    # a date alone ends in '-01' but has no offset
    assert offset_stamps_utc(["2026-07-01"], "p", "w") is None


def test_an_open_meteo_file_mixing_times_with_and_without_offset_is_refused(tmp_path):
    from carbonsched.errors import DataFormatError

    doc = {"timezone": BERLIN, "hourly": {"time": ["2026-03-28T23:00+01:00", "2026-03-29T01:00"],
                                          "temperature_2m": [1, 2],
                                          "relative_humidity_2m": [50, 50]},
           "hourly_units": {"temperature_2m": "°C"}}
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(DataFormatError, match=r"hourly.time\[1\] = '2026-03-29T01:00' mixes "
                       r"times with and without a UTC offset"):
        read_open_meteo(path)
