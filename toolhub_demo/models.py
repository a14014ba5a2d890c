"""The demo record models: the SQL demo database's customers, products and orders, per tenant, as Django models."""

from __future__ import annotations

from django.core.validators import MinValueValidator
from django.db import models

from tenants_app.models import Tenant


class Customer(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=200)
    email = models.EmailField()
    city = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateField()

    class Meta:
        ordering = ["id"]
        # Unique per tenant: a global rule would let one tenant learn another's addresses by colliding.
        constraints = [models.UniqueConstraint(fields=["tenant", "email"], name="uniq_demo_customer_email")]

    def __str__(self) -> str:
        return self.name


class Product(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    sku = models.CharField(max_length=32)
    name = models.CharField(max_length=200)
    price_cents = models.PositiveIntegerField()
    stock = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["tenant", "sku"], name="uniq_demo_product_sku")]

    def __str__(self) -> str:
        return f"{self.sku} {self.name}"


class OrderStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SHIPPED = "shipped", "Shipped"
    CANCELLED = "cancelled", "Cancelled"


class Order(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    # PROTECT: deleting a customer or product never silently takes orders (maybe not the caller's) with it.
    customer = models.ForeignKey(Customer, on_delete=models.PROTECT, related_name="orders")
    product = models.ForeignKey(Product, on_delete=models.PROTECT, related_name="orders")
    quantity = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    status = models.CharField(max_length=16, choices=OrderStatus.choices, default=OrderStatus.PENDING)
    ordered_at = models.DateField()

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"order {self.pk} ({self.quantity} × product {self.product_id}, {self.status})"
