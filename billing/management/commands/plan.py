from decimal import Decimal, InvalidOperation

from django.core.management.base import BaseCommand, CommandError

from billing.services import parse_features, plan_upsert


class Command(BaseCommand):
    help = "Create or update a plan: plan NAME --features api,streaming --monthly-requests N ..."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--features", help='Comma-separated: api, streaming ("" for none).')
        parser.add_argument("--monthly-requests", type=int)
        parser.add_argument("--monthly-bytes", type=int)
        parser.add_argument("--pair-price-usd")
        parser.add_argument("--monthly-price-usd")
        parser.add_argument("--stripe-price", help='The Stripe price id it is sold with (price_...; "" for none).')

    def handle(self, *args, name, features, monthly_requests, monthly_bytes, pair_price_usd, monthly_price_usd,
               stripe_price, **opts):
        try:
            feature_list = parse_features(features) if features is not None else None
            price = Decimal(pair_price_usd) if pair_price_usd is not None else None
            monthly = Decimal(monthly_price_usd) if monthly_price_usd is not None else None
            for label, value in (("--monthly-requests", monthly_requests), ("--monthly-bytes", monthly_bytes),
                                 ("--pair-price-usd", price), ("--monthly-price-usd", monthly)):
                if value is not None and value < 0:
                    raise ValueError(f"{label} must not be negative.")
            if stripe_price and not stripe_price.startswith("price_"):
                raise ValueError("--stripe-price is a Stripe price id: price_...")
            plan = plan_upsert(name=name, features=feature_list, monthly_requests=monthly_requests,
                               monthly_bytes=monthly_bytes, pair_price_usd=price, monthly_price_usd=monthly,
                               stripe_price_id=stripe_price)
        except (ValueError, InvalidOperation) as exc:
            raise CommandError(str(exc)) from exc
        except Exception as exc:  # model validation: a bad slug and the like
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"plan {plan.name}: features={','.join(plan.features) or '-'} "
                          f"requests={plan.monthly_requests} bytes={plan.monthly_bytes} "
                          f"pair_price_usd={plan.pair_price_usd} monthly_price_usd={plan.monthly_price_usd} "
                          f"stripe_price={plan.stripe_price_id or '-'}")
